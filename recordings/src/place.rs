//! Places of a recording's bodies in its text, found for all of them in one pass over the text:
//! a capture of thousands of requests is one line of megabytes, and finding each body from the
//! file's start (path by path, offset by offset) read it once per request.

use std::collections::HashMap;
use std::ops::Range;

use kvlint_request::locate::{LineIndex, array_item_ranges, value_start};
use kvlint_request::path::PathSegment;

use crate::Place;

/// Where values of one JSON text start, by path: the items of each array a path goes through
/// are found once, and lines and columns are counted with the text's [`LineIndex`].
pub(crate) struct JsonPlaces<'a> {
    text: &'a str,
    lines: LineIndex,
    /// The items of each array reached so far (ranges from its start), by the array's offset.
    arrays: HashMap<usize, Vec<Range<usize>>>,
}

impl<'a> JsonPlaces<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Self {
            text,
            lines: LineIndex::new(text),
            arrays: HashMap::new(),
        }
    }

    /// Where the value at `path` starts (the file's start when it is not found).
    pub(crate) fn place(&mut self, path: &[PathSegment]) -> Place {
        self.offset(path).map_or_else(Place::default, |offset| {
            let place = self.lines.line_column(self.text, offset);
            Place {
                line: place.line,
                column: place.column,
            }
        })
    }

    fn offset(&mut self, path: &[PathSegment]) -> Option<usize> {
        let text = self.text;
        let mut start = text.len() - text.trim_start().len();
        for segment in path {
            start += match segment {
                PathSegment::Key(_) => value_start(&text[start..], std::slice::from_ref(segment))?,
                PathSegment::Index(index) => {
                    let items = self
                        .arrays
                        .entry(start)
                        .or_insert_with(|| array_item_ranges(&text[start..]).unwrap_or_default());
                    items.get(*index)?.start
                }
            };
        }
        Some(start)
    }
}

#[cfg(test)]
mod tests {
    use kvlint_request::locate::{LineColumn, value_range};
    use serde_json::{Value, json};

    use super::*;

    /// Texts of many items, one line and pretty-printed, with characters of one to four bytes
    /// before and inside the values asked for.
    fn texts() -> Vec<String> {
        let entries: Vec<Value> = (0..40)
            .map(|index| {
                json!({"note": "é\u{1F600}".repeat(index % 5), "request": {"postData": {"text": format!("{{\"n\": {index}}}")}},
                       "events": [{"call": {"request": [index, "ü"]}}, {"call": {"request": {"x": "\n"}}}]})
            })
            .collect();
        let root = json!({"head": "\u{2603}", "log": {"entries": entries}});
        let pretty = serde_json::to_string_pretty(&root).unwrap_or_default();
        vec![root.to_string(), format!("  \n {pretty}"), pretty]
    }

    fn paths(index: usize) -> Vec<Vec<PathSegment>> {
        let entry = [
            PathSegment::Key("log"),
            PathSegment::Key("entries"),
            PathSegment::Index(index),
        ];
        vec![
            [
                &entry[..],
                &[
                    PathSegment::Key("request"),
                    PathSegment::Key("postData"),
                    PathSegment::Key("text"),
                ],
            ]
            .concat(),
            [
                &entry[..],
                &[
                    PathSegment::Key("events"),
                    PathSegment::Index(1),
                    PathSegment::Key("call"),
                ],
            ]
            .concat(),
            [&entry[..], &[PathSegment::Key("missing")]].concat(),
        ]
    }

    /// What finding the place from the text's start gives.
    fn place_from_start(text: &str, path: &[PathSegment]) -> Place {
        value_range(text, path).map_or_else(Place::default, |range| {
            let LineColumn { line, column } = LineColumn::of_offset(text, range.start);
            Place { line, column }
        })
    }

    #[test]
    fn places_found_in_one_pass_are_the_places_found_from_the_start() {
        for text in texts() {
            let mut places = JsonPlaces::new(&text);
            // In document order, then out of it; an index past the end.
            for index in (0..41).chain([7, 3, 39, 0]) {
                for path in paths(index) {
                    assert_eq!(
                        places.place(&path),
                        place_from_start(&text, &path),
                        "{path:?}"
                    );
                }
            }
        }
    }
}
