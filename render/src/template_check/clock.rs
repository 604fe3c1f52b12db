//! The clock in a template: `strftime_now` in the prompt (a date changes it at midnight, a
//! time of day on every request), and date variables a server may fill with today's date.
//!
//! The first request is rendered today and a day later; if they differ, it is rendered at
//! two times of the same day to tell a date from a time. Each `strftime_now` call is then
//! moved to the later day alone, to find the one whose text comes first in the prompt, and
//! made to fail, to find its place in the template.

use chrono::{Duration, NaiveDateTime, NaiveTime};
use serde_json::Value;

use super::{BreakCondition, TemplateBreak, TemplateBreakKind, common_prefix, divergence};
use crate::error::RenderError;
use crate::template::{ChatTemplate, Clock, SiteProbe, TemplateSite};

/// More `strftime_now` calls than any real template makes.
const MAX_CALLS: usize = 8;

/// A date a server would not send, to see whether a date variable reaches the prompt.
const SENTINEL_DATE: &str = "01 Jan 2031";

/// The first request's break from `strftime_now`, if the clock reaches the prompt.
pub(super) fn clock_break(
    template: &ChatTemplate,
    now: NaiveDateTime,
    messages: &[Value],
    tools: &[Value],
    condition: Option<BreakCondition>,
) -> Result<Option<TemplateBreak>, RenderError> {
    let render = |clock: Clock| {
        template
            .with_clock(clock)
            .apply(messages, Some(tools), true)
    };
    let later = now + Duration::days(1) + Duration::hours(1);
    let today = render(Clock::At(now))?;
    let tomorrow = render(Clock::At(later))?;
    if today == tomorrow {
        return Ok(None);
    }
    let at = |hour, minute, second| {
        NaiveTime::from_hms_opt(hour, minute, second).map(|time| now.date().and_time(time))
    };
    let same_day = at(3, 4, 5).zip(at(16, 17, 18));
    let time_of_day = match same_day {
        Some((morning, evening)) => render(Clock::At(morning))? != render(Clock::At(evening))?,
        None => false,
    };
    let kind = if time_of_day {
        TemplateBreakKind::TimeInjected
    } else {
        TemplateBreakKind::DateInjected
    };
    let Some(mut found) = divergence(&today, &tomorrow, kind, 0) else {
        return Ok(None);
    };
    found.condition = condition;
    found.site = responsible_call(template, now, later, messages, tools, &today);
    found.variable = pinning_variable(template, now, later, messages, tools);
    Ok(Some(found))
}

/// The `strftime_now` call whose text is the first to change in the prompt, and its place.
fn responsible_call(
    template: &ChatTemplate,
    now: NaiveDateTime,
    later: NaiveDateTime,
    messages: &[Value],
    tools: &[Value],
    today: &str,
) -> Option<TemplateSite> {
    let mut first: Option<(usize, usize)> = None;
    for call in 0..MAX_CALLS {
        let clock = Clock::OneCallAt {
            base: now,
            later,
            call,
        };
        let Ok(text) = template
            .with_clock(clock)
            .apply(messages, Some(tools), true)
        else {
            break;
        };
        if text != today {
            let offset = common_prefix(today, &text);
            if first.is_none_or(|(earliest, _)| offset < earliest) {
                first = Some((offset, call));
            }
        }
    }
    let (_, call) = first?;
    template.site(messages, Some(tools), SiteProbe::StrftimeCall(call))
}

/// Variables the template reads that name a date or time (`date_string`, `current_date`,
/// `datetime`), sorted.
pub(super) fn date_variables(template: &ChatTemplate) -> Vec<String> {
    const WORDS: [&str; 7] = [
        "date",
        "datetime",
        "time",
        "today",
        "now",
        "day",
        "timestamp",
    ];
    template
        .undeclared_variables()
        .into_iter()
        .filter(|name| {
            name.to_ascii_lowercase()
                .split('_')
                .any(|word| WORDS.contains(&word))
        })
        .collect()
}

/// A variable that, passed as a fixed value, keeps the clock out of the prompt.
fn pinning_variable(
    template: &ChatTemplate,
    now: NaiveDateTime,
    later: NaiveDateTime,
    messages: &[Value],
    tools: &[Value],
) -> Option<String> {
    date_variables(template).into_iter().find(|name| {
        let mut pinned = template.clone();
        pinned
            .kwargs
            .insert(name.clone(), Value::String(SENTINEL_DATE.into()));
        let render = |clock: Clock| pinned.with_clock(clock).apply(messages, Some(tools), true);
        matches!((render(Clock::At(now)), render(Clock::At(later))), (Ok(a), Ok(b)) if a == b)
    })
}

/// Date variables that reach the first request's prompt: fixed by default (or filled with a
/// placeholder), but a server that passes today's date changes the prompt daily.
pub(super) fn date_variable_breaks(
    template: &ChatTemplate,
    messages: &[Value],
    tools: &[Value],
    prompt: &str,
) -> Vec<TemplateBreak> {
    date_variables(template)
        .into_iter()
        .filter_map(|name| {
            let mut dated = template.clone();
            dated
                .kwargs
                .insert(name.clone(), Value::String(SENTINEL_DATE.into()));
            let with_date = dated.apply(messages, Some(tools), true).ok()?;
            if !with_date.contains(SENTINEL_DATE) {
                return None;
            }
            let mut found = divergence(prompt, &with_date, TemplateBreakKind::DateVariable, 0)?;
            found.site = template.site(messages, Some(tools), SiteProbe::Variable(&name));
            found.variable = Some(name);
            Some(found)
        })
        .collect()
}
