//! Reading the model file: [`Model::load`] and [`Model::from_bytes`] validate every tensor's name,
//! shape and dtype against the configuration in the file's metadata.

use std::collections::HashMap;
use std::path::Path;

use ndarray::Array2;

use super::forward::rope_tables;
use super::{Block, Config, EMBEDDED, EMBEDDED_PATH, Model, ModelError, ModelName};

fn meta<'a>(m: &'a HashMap<String, String>, path: &str, key: &str) -> Result<&'a str, ModelError> {
    m.get(key).map(String::as_str).ok_or_else(|| ModelError::Config {
        path: path.into(),
        key: key.into(),
        msg: "missing".into(),
    })
}

fn parse<T: std::str::FromStr>(m: &HashMap<String, String>, path: &str, key: &str) -> Result<T, ModelError> {
    let v = meta(m, path, key)?;
    v.parse().map_err(|_| ModelError::Config {
        path: path.into(),
        key: key.into(),
        msg: format!("`{v}` is not a valid value"),
    })
}

impl Model {
    /// The committed model.
    pub fn embedded() -> Result<Model, ModelError> {
        Model::from_bytes(EMBEDDED, EMBEDDED_PATH)
    }

    /// Load a model file.
    pub fn load(path: &Path) -> Result<Model, ModelError> {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| ModelError::Io {
            path: shown.clone(),
            msg: e.to_string(),
        })?;
        Model::from_bytes(&bytes, &shown)
    }

    /// Parse and validate the bytes of a safetensors file; `path` names it in errors.
    pub fn from_bytes(bytes: &[u8], path: &str) -> Result<Model, ModelError> {
        let format = |msg: String| ModelError::Format { path: path.into(), msg };
        let (_, md) = safetensors::SafeTensors::read_metadata(bytes).map_err(|e| format(e.to_string()))?;
        let st = safetensors::SafeTensors::deserialize(bytes).map_err(|e| format(e.to_string()))?;
        let empty = HashMap::new();
        let m = md.metadata().as_ref().unwrap_or(&empty);
        let layout = meta(m, path, "rope_layout")?;
        if layout != "rotate_half" {
            return Err(ModelError::Config {
                path: path.into(),
                key: "rope_layout".into(),
                msg: format!("`{layout}`: only rotate_half is implemented"),
            });
        }
        if meta(m, path, "tied_embeddings")? != "True" {
            return Err(ModelError::Config {
                path: path.into(),
                key: "tied_embeddings".into(),
                msg: "only tied embeddings are implemented".into(),
            });
        }
        let c = Config {
            vocab: parse(m, path, "vocab")?,
            d_model: parse(m, path, "d_model")?,
            n_layers: parse(m, path, "n_layers")?,
            n_heads: parse(m, path, "n_heads")?,
            n_kv_heads: parse(m, path, "n_kv_heads")?,
            head_dim: parse(m, path, "head_dim")?,
            ffn_hidden: parse(m, path, "ffn_hidden")?,
            context: parse(m, path, "context")?,
            rope_base: parse(m, path, "rope_base")?,
            norm_eps: parse(m, path, "norm_eps")?,
            start_byte: match m.get("start_byte") {
                None => None,
                Some(_) => Some(parse(m, path, "start_byte")?),
            },
        };
        let bad = |key: &str, msg: &str| ModelError::Config {
            path: path.into(),
            key: key.into(),
            msg: msg.into(),
        };
        if c.vocab != 256 {
            return Err(bad("vocab", "the tokenizer is byte-level: vocab must be 256"));
        }
        if c.n_heads == 0 || c.n_kv_heads == 0 || !c.n_heads.is_multiple_of(c.n_kv_heads) {
            return Err(bad("n_kv_heads", "KV heads must divide query heads"));
        }
        if c.head_dim == 0 || !c.head_dim.is_multiple_of(2) || c.head_dim > crate::compute::MAX_HEAD_DIM {
            return Err(bad("head_dim", "head_dim must be even and at most the kernels' limit"));
        }
        if c.d_model == 0 || c.n_layers == 0 || c.ffn_hidden == 0 || c.context == 0 {
            return Err(bad("d_model", "every size must be positive"));
        }
        let mut used = 0usize;
        let mut parameters = 0usize;
        let mut get = |name: &str, shape: &[usize]| -> Result<Vec<f32>, ModelError> {
            let terr = |msg: String| ModelError::Tensor {
                path: path.into(),
                name: name.into(),
                msg,
            };
            let t = st.tensor(name).map_err(|_| terr("missing".into()))?;
            if t.dtype() != safetensors::Dtype::F32 {
                return Err(terr(format!("dtype {:?}, expected F32", t.dtype())));
            }
            if t.shape() != shape {
                return Err(terr(format!("shape {:?}, expected {shape:?}", t.shape())));
            }
            used += 1;
            parameters += t.shape().iter().product::<usize>();
            Ok(bytemuck::pod_collect_to_vec::<u8, f32>(t.data()))
        };
        // PyTorch stores Linear weights as [out, in]; kvscope multiplies x · W with W as [in, out].
        let mut linear = |name: &str, out: usize, inp: usize| -> Result<Array2<f32>, ModelError> {
            let w = get(name, &[out, inp])?;
            Ok(Array2::from_shape_vec((out, inp), w)
                .expect("shape checked")
                .reversed_axes()
                .as_standard_layout()
                .to_owned())
        };
        let (d, hd) = (c.d_model, c.head_dim);
        let mut blocks = Vec::new();
        for i in 0..c.n_layers {
            let p = format!("layers.{i}.");
            blocks.push(Block {
                attention_norm: Vec::new(),
                wq: linear(&format!("{p}attention.wq.weight"), c.n_heads * hd, d)?,
                wk: linear(&format!("{p}attention.wk.weight"), c.n_kv_heads * hd, d)?,
                wv: linear(&format!("{p}attention.wv.weight"), c.n_kv_heads * hd, d)?,
                wo: linear(&format!("{p}attention.wo.weight"), d, c.n_heads * hd)?,
                ffn_norm: Vec::new(),
                w1: linear(&format!("{p}feed_forward.w1.weight"), c.ffn_hidden, d)?,
                w3: linear(&format!("{p}feed_forward.w3.weight"), c.ffn_hidden, d)?,
                w2: linear(&format!("{p}feed_forward.w2.weight"), d, c.ffn_hidden)?,
            });
        }
        for (i, b) in blocks.iter_mut().enumerate() {
            b.attention_norm = get(&format!("layers.{i}.attention_norm.weight"), &[d])?;
            b.ffn_norm = get(&format!("layers.{i}.ffn_norm.weight"), &[d])?;
        }
        let embed =
            Array2::from_shape_vec((c.vocab, d), get("tok_embeddings.weight", &[c.vocab, d])?).expect("shape checked");
        let norm = get("norm.weight", &[d])?;
        if used != st.names().len() {
            let expected: std::collections::BTreeSet<String> = std::iter::once("tok_embeddings.weight".to_string())
                .chain(std::iter::once("norm.weight".to_string()))
                .chain((0..c.n_layers).flat_map(|i| {
                    [
                        "attention_norm",
                        "attention.wq",
                        "attention.wk",
                        "attention.wv",
                        "attention.wo",
                        "ffn_norm",
                        "feed_forward.w1",
                        "feed_forward.w3",
                        "feed_forward.w2",
                    ]
                    .map(|n| format!("layers.{i}.{n}.weight"))
                }))
                .collect();
            let extra = st.names().into_iter().find(|n| !expected.contains(*n)).unwrap_or("?");
            return Err(ModelError::Tensor {
                path: path.into(),
                name: extra.into(),
                msg: "not part of the architecture in the metadata".into(),
            });
        }
        let rope = rope_tables(c.context.max(super::MAX_POSITIONS), hd, c.rope_base);
        Ok(Model {
            config: c,
            embed,
            blocks,
            norm,
            parameters,
            rope,
            tokenizer: super::Tokenizer::Bytes,
            name: super::ModelName::Tiny,
        })
    }
}

impl Model {
    /// The model `name`, from `file` when given (a safetensors file for the tiny model, a GGUF file for
    /// SmolLM2), else from where it lives: the embedded tiny model, SmolLM2 from [`super::smollm2::default_path`].
    pub fn select(name: ModelName, file: Option<&Path>) -> Result<Model, ModelError> {
        match (name, file) {
            (ModelName::Tiny, None) => Model::embedded(),
            (ModelName::Tiny, Some(p)) => Model::load(p),
            (ModelName::Smollm2, p) => {
                super::smollm2::load(&p.map_or_else(super::smollm2::default_path, |p| p.to_path_buf()))
            }
        }
    }

    /// The first `n` tokens of the model's held-out text, and where they come from: the tiny model's bytes
    /// of `assets/models/kvscope-tiny.heldout.txt`, SmolLM2's BPE tokens of `assets/texts/heldout-en.txt`
    /// (577 in all).
    pub fn heldout_tokens(&self, n: usize) -> Result<(Vec<u32>, String), String> {
        match self.name {
            ModelName::Tiny => {
                let b = &super::HELDOUT[..n.min(super::HELDOUT.len())];
                let source = format!("the first {} bytes of assets/models/kvscope-tiny.heldout.txt", b.len());
                Ok((b.iter().map(|&x| u32::from(x)).collect(), source))
            }
            ModelName::Smollm2 => {
                let mut t = self.tokenizer.encode(super::HELDOUT_EN)?;
                t.truncate(n);
                let source = format!("the first {} tokens of assets/texts/heldout-en.txt", t.len());
                Ok((t, source))
            }
        }
    }

    /// What the model is, in a line (for manifests and captions).
    pub fn describe(&self) -> String {
        match self.name {
            ModelName::Tiny => format!("kvscope-tiny: byte-level, {} parameters, trained here", self.parameters),
            ModelName::Smollm2 => format!("{} ({} parameters)", super::smollm2::DESCRIPTION, self.parameters),
        }
    }
}
