//! What the probed engine is and how its cache is set up: its kind, the model it serves, its
//! slots, block or page size, and from these the cache model kvlint predicts with.

use kvlint_core::cache::Engine;
use kvlint_fleet::cache::{SGLANG_PAGE_SIZE, VLLM_BLOCK_SIZE};
use kvlint_fleet::{CacheSize, SimEngine};
use kvlint_protocol::EngineName;
use serde_json::Value;

use crate::engine_client::{Client, prometheus_label};

impl Client {
    /// Guesses the engine from the endpoints it answers.
    pub fn detect(&self) -> EngineName {
        let metrics = self.get_text("/metrics").unwrap_or_default();
        if metrics.contains("vllm:") {
            EngineName::Vllm
        } else if metrics.contains("sglang:") {
            EngineName::Sglang
        } else {
            EngineName::LlamaCpp
        }
    }

    /// The model the server serves (`/v1/models`): vLLM and SGLang reject other names.
    pub fn served_model(&self) -> Option<String> {
        let models: Value = serde_json::from_str(&self.get_text("/v1/models")?).ok()?;
        models.pointer("/data/0/id")?.as_str().map(str::to_owned)
    }

    /// How many slots a llama.cpp server has (`/slots`).
    pub(super) fn slot_count(&self) -> Option<usize> {
        let slots: Value = serde_json::from_str(&self.get_text("/slots")?).ok()?;
        slots.as_array().map(Vec::len)
    }

    /// The cache model of this engine, with the settings the engine reports about itself;
    /// hosted APIs are modelled for `model` (their figures differ per model).
    pub(crate) fn cache_model(&self, kind: EngineName, model: Option<&str>) -> Engine {
        match kind {
            // The probe sends whole prompts; `--cache-reuse` is not reported by the server.
            EngineName::LlamaCpp => Engine::LlamaCpp { cache_reuse: 0 },
            EngineName::Vllm => Engine::Vllm {
                block: self.vllm_block_size(),
                speculative: false,
            },
            EngineName::Sglang => Engine::Sglang {
                page: self.sglang_page_size(),
            },
            EngineName::OpenAi => Engine::OpenAi {
                model: model.map(str::to_owned),
            },
            EngineName::Anthropic => Engine::Anthropic {
                model: model.map(str::to_owned),
            },
            EngineName::Gemini => Engine::Gemini {
                model: model.map(str::to_owned),
            },
            EngineName::DeepSeek => Engine::DeepSeek,
            EngineName::Xai => Engine::Xai {
                model: model.map(str::to_owned),
            },
        }
    }

    /// The replica cache `kvlint simulate` models this self-hosted engine with, set up as the
    /// engine reports: vLLM's block size and its KV cache's blocks (`num_gpu_blocks`), SGLang's
    /// page size, llama.cpp's slots (`/slots`); `None` for a hosted API. llama-server does not
    /// report its host prompt cache's size (`--cache-ram`, on by default at 8 GiB): it is
    /// modelled as holding every prompt saved to it.
    pub(crate) fn replica_cache(&self, model: &Engine) -> Option<(SimEngine, CacheSize)> {
        let to_u32 = |value: usize| u32::try_from(value).unwrap_or(u32::MAX).max(1);
        match model {
            Engine::Vllm { block, .. } => {
                let metrics = self.get_text("/metrics").unwrap_or_default();
                let blocks = prometheus_label(&metrics, "vllm:cache_config_info", "num_gpu_blocks")
                    .and_then(|value| value.parse().ok())
                    .map_or(CacheSize::Unbounded, CacheSize::Blocks);
                Some((
                    SimEngine::Vllm {
                        block: to_u32(*block),
                    },
                    blocks,
                ))
            }
            Engine::Sglang { page } => Some((
                SimEngine::Sglang {
                    page: to_u32(*page),
                },
                CacheSize::Unbounded,
            )),
            Engine::LlamaCpp { .. } => Some((
                SimEngine::LlamaCpp {
                    slots: to_u32(self.slot_count().unwrap_or(1)),
                    block: 1,
                },
                CacheSize::Unbounded,
            )),
            _ => None,
        }
    }

    /// vLLM's block size, from the `vllm:cache_config_info` gauge.
    fn vllm_block_size(&self) -> usize {
        let metrics = self.get_text("/metrics").unwrap_or_default();
        prometheus_label(&metrics, "vllm:cache_config_info", "block_size")
            .and_then(|value| value.parse().ok())
            .unwrap_or(VLLM_BLOCK_SIZE as usize)
    }

    /// SGLang's page size, from the server arguments `/get_server_info` lists; some attention
    /// backends force pages of 16 to 128 tokens, and a hit is cut to whole pages.
    fn sglang_page_size(&self) -> usize {
        self.get_text("/get_server_info")
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .and_then(|info| info.get("page_size")?.as_u64())
            .and_then(|page| usize::try_from(page).ok())
            .filter(|page| *page > 0)
            .unwrap_or(SGLANG_PAGE_SIZE as usize)
    }
}
