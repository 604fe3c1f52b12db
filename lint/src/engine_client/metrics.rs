//! Values read off an engine's Prometheus metrics (`/metrics`): what the probe learns of an
//! engine's cache, and which replica's counters moved for the proxy.

/// The value of the first sample of `metric` in Prometheus text.
pub fn prometheus_value(text: &str, metric: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find(|line| line.split([' ', '{']).next() == Some(metric))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

/// The value of `label` on the first sample of `metric` in Prometheus text. Metric names
/// with colons (`vllm:*`) are kept, unlike some parsers do.
pub fn prometheus_label(text: &str, metric: &str, label: &str) -> Option<String> {
    let line = text.lines().find(|line| {
        !line.starts_with('#') && line.starts_with(metric) && line[metric.len()..].starts_with('{')
    })?;
    let labels = &line[line.find('{')? + 1..line.find('}')?];
    labels.split(',').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key.trim() == label).then(|| value.trim().trim_matches('"').to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_labels_keep_colon_names() {
        let metrics = "# HELP vllm:cache_config_info info\n# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"32\",enable_prefix_caching=\"True\"} 1.0\n";
        assert_eq!(
            prometheus_label(metrics, "vllm:cache_config_info", "block_size").as_deref(),
            Some("32")
        );
        assert_eq!(
            prometheus_label(metrics, "vllm:cache_config_info", "missing"),
            None
        );
    }
}
