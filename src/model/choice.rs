//! Which model a lesson runs: the value of a `kind = "model"` parameter, and what each choice needs.

/// Which model a lesson runs: the value of a `kind = "model"` parameter (0 random weights, 1 the tiny
/// model, 2 SmolLM2-135M-Instruct).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// No model: seeded random weights (lessons 1–2's shapes) or random K/V (lesson 5).
    Random,
    /// The byte-level model trained here, embedded.
    Tiny,
    /// SmolLM2-135M-Instruct from its file ([`super::smollm2::shared`]).
    Smollm2,
}

impl Choice {
    /// Every choice, in value order.
    pub const ALL: [Choice; 3] = [Choice::Random, Choice::Tiny, Choice::Smollm2];

    /// The choice of parameter value `v` (clamped to 0..=2).
    pub fn from_value(v: i64) -> Choice {
        match v {
            i64::MIN..=0 => Choice::Random,
            1 => Choice::Tiny,
            _ => Choice::Smollm2,
        }
    }

    /// Its parameter value.
    pub fn value(self) -> i64 {
        match self {
            Choice::Random => 0,
            Choice::Tiny => 1,
            Choice::Smollm2 => 2,
        }
    }

    /// Its name on the switch, in English and Chinese.
    pub fn label(self) -> [&'static str; 2] {
        match self {
            Choice::Random => ["seeded random numbers (no model)", "带种子的随机数（无模型）"],
            Choice::Tiny => ["tiny model (trained here, 0.8M)", "小模型（在此训练，0.8M）"],
            Choice::Smollm2 => [
                "SmolLM2-135M-Instruct (real, 4-bit file)",
                "SmolLM2-135M-Instruct（真实模型，4 位文件）",
            ],
        }
    }

    /// Whether it can run here, without loading it: `Err` says what is missing and how to get it.
    pub fn available(self) -> Result<(), String> {
        match self {
            Choice::Smollm2 => super::smollm2::available(),
            _ => Ok(()),
        }
    }

    /// Its layers and query heads (`None` for random weights), without loading SmolLM2.
    pub fn shape(self) -> Option<(usize, usize)> {
        match self {
            Choice::Random => None,
            Choice::Tiny => super::shared().ok().map(|m| (m.config.n_layers, m.config.n_heads)),
            Choice::Smollm2 => Some((super::smollm2::LAYERS, super::smollm2::HEADS)),
        }
    }

    /// The model (`None` for random weights; loading SmolLM2 the first time takes seconds).
    pub fn model(self) -> Option<Result<&'static super::Model, String>> {
        match self {
            Choice::Random => None,
            Choice::Tiny => Some(super::shared().map_err(|e| e.to_string())),
            Choice::Smollm2 => Some(super::smollm2::shared().map_err(|e| e.to_string())),
        }
    }

    /// The trained model of a lesson that runs no random weights (its file says `min = 1`): random
    /// weights, had a hand-made state asked for them, fall back to the tiny model.
    pub fn trained_model(self) -> Result<&'static super::Model, String> {
        match self {
            Choice::Random => Choice::Tiny,
            c => c,
        }
        .model()
        .unwrap_or_else(|| Err("no trained model".into()))
    }
}
