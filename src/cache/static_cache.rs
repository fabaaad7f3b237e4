//! The static (preallocated) KV cache of the source notes.
//!
//! How it works: one K tensor and one V tensor of shape `[layers, batch, kv_heads, max_seq_len, head_dim]`
//! are reserved up front in f16. Decode step `pos` writes each layer's new K/V row at `pos`, layer after
//! layer, and that layer's attention then reads rows `0..=pos`. Memory is reserved for `max_seq_len` tokens
//! whether or not they are ever generated.

use half::f16;

/// Errors of the static cache.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StaticCacheError {
    /// Position beyond the reservation.
    #[error("position {pos} is outside the static cache (max_seq_len = {max_seq_len})")]
    Full {
        /// The position written.
        pos: usize,
        /// The reservation.
        max_seq_len: usize,
    },
    /// Layer index out of range.
    #[error("layer {layer} does not exist (the cache has {layers} layers)")]
    NoSuchLayer {
        /// The layer asked for.
        layer: usize,
        /// How many there are.
        layers: usize,
    },
    /// Wrong input length.
    #[error("expected {expected} values for one token's K (or V) of every batch row and KV head, got {got}")]
    BadInput {
        /// Expected length.
        expected: usize,
        /// Actual length.
        got: usize,
    },
}

/// The shape of a static cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StaticShape {
    /// Transformer layers.
    pub layers: usize,
    /// Sequences decoded together.
    pub batch: usize,
    /// KV heads.
    pub kv_heads: usize,
    /// Reserved positions per sequence.
    pub max_seq_len: usize,
    /// Values per head.
    pub head_dim: usize,
}

impl StaticShape {
    /// Elements in one of K or V.
    pub fn numel(&self) -> usize {
        self.layers * self.batch * self.kv_heads * self.max_seq_len * self.head_dim
    }

    /// Flat index of `(layer, b, h, pos, d)`.
    pub fn index(&self, layer: usize, b: usize, h: usize, pos: usize, d: usize) -> usize {
        (((layer * self.batch + b) * self.kv_heads + h) * self.max_seq_len + pos) * self.head_dim + d
    }
}

/// A preallocated f16 KV cache.
#[derive(Debug, Clone)]
pub struct StaticKvCache {
    shape: StaticShape,
    /// K storage `[layers, batch, kv_heads, max_seq_len, head_dim]`.
    pub k: Vec<f16>,
    /// V storage, same shape.
    pub v: Vec<f16>,
    /// Filled length of each layer (highest written position + 1).
    lens: Vec<usize>,
}

const F16_BYTES: usize = 2;

impl StaticKvCache {
    /// Reserve the whole cache (zeros).
    pub fn new(shape: StaticShape) -> Self {
        let n = shape.numel();
        Self {
            shape,
            k: vec![f16::ZERO; n],
            v: vec![f16::ZERO; n],
            lens: vec![0; shape.layers],
        }
    }

    /// The shape.
    pub fn shape(&self) -> StaticShape {
        self.shape
    }

    /// Tokens stored in `layer`.
    pub fn len(&self, layer: usize) -> usize {
        self.lens.get(layer).copied().unwrap_or(0)
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.lens.iter().all(|&l| l == 0)
    }

    /// Check that a write of `(layer, pos)` with `len` values per tensor is in bounds.
    pub fn check_write(&self, layer: usize, pos: usize, len: usize) -> Result<(), StaticCacheError> {
        let s = self.shape;
        if layer >= s.layers {
            return Err(StaticCacheError::NoSuchLayer {
                layer,
                layers: s.layers,
            });
        }
        if pos >= s.max_seq_len {
            return Err(StaticCacheError::Full {
                pos,
                max_seq_len: s.max_seq_len,
            });
        }
        let expected = s.batch * s.kv_heads * s.head_dim;
        if len != expected {
            return Err(StaticCacheError::BadInput { expected, got: len });
        }
        Ok(())
    }

    /// Record that `(layer, pos)` was written (used by backends that write the storage themselves).
    pub fn mark_written(&mut self, layer: usize, pos: usize) {
        if let Some(l) = self.lens.get_mut(layer) {
            *l = (*l).max(pos + 1);
        }
    }

    /// Write one token's K and V (`[batch, kv_heads, head_dim]` each) of `layer` at `pos`.
    pub fn append(&mut self, layer: usize, pos: usize, k: &[f32], v: &[f32]) -> Result<(), StaticCacheError> {
        self.check_write(layer, pos, k.len())?;
        self.check_write(layer, pos, v.len())?;
        let s = self.shape;
        for b in 0..s.batch {
            for h in 0..s.kv_heads {
                let src = (b * s.kv_heads + h) * s.head_dim;
                let dst = s.index(layer, b, h, pos, 0);
                for d in 0..s.head_dim {
                    self.k[dst + d] = f16::from_f32(k[src + d]);
                    self.v[dst + d] = f16::from_f32(v[src + d]);
                }
            }
        }
        self.mark_written(layer, pos);
        Ok(())
    }

    /// K and V of `layer` for positions `0..end`, as `[batch, kv_heads, end, head_dim]` f32.
    pub fn read(&self, layer: usize, end: usize) -> Result<(Vec<f32>, Vec<f32>), StaticCacheError> {
        let s = self.shape;
        if layer >= s.layers {
            return Err(StaticCacheError::NoSuchLayer {
                layer,
                layers: s.layers,
            });
        }
        if end > s.max_seq_len {
            return Err(StaticCacheError::Full {
                pos: end,
                max_seq_len: s.max_seq_len,
            });
        }
        let mut k = Vec::with_capacity(s.batch * s.kv_heads * end * s.head_dim);
        let mut v = Vec::with_capacity(k.capacity());
        for b in 0..s.batch {
            for h in 0..s.kv_heads {
                let start = s.index(layer, b, h, 0, 0);
                let stop = start + end * s.head_dim;
                k.extend(self.k[start..stop].iter().map(|x| x.to_f32()));
                v.extend(self.v[start..stop].iter().map(|x| x.to_f32()));
            }
        }
        Ok((k, v))
    }

    /// Bytes reserved for K and V together.
    pub fn bytes_reserved(&self) -> usize {
        2 * self.shape.numel() * F16_BYTES
    }

    /// Bytes holding tokens that were written (K and V, every layer).
    pub fn bytes_used(&self) -> usize {
        let s = self.shape;
        self.lens
            .iter()
            .map(|&l| 2 * s.batch * s.kv_heads * l * s.head_dim * F16_BYTES)
            .sum()
    }

    /// K/V bytes one decode step at `pos` reads across all layers (each layer reads `0..=pos`).
    pub fn decode_bytes_read(&self, pos: usize) -> usize {
        let s = self.shape;
        2 * s.layers * s.batch * s.kv_heads * (pos + 1).min(s.max_seq_len) * s.head_dim * F16_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_read_and_accounting() {
        let shape = StaticShape {
            layers: 2,
            batch: 1,
            kv_heads: 2,
            max_seq_len: 8,
            head_dim: 3,
        };
        let mut c = StaticKvCache::new(shape);
        assert_eq!(c.bytes_reserved(), 2 * 2 * 2 * 8 * 3 * 2);
        for pos in 0..3 {
            for layer in 0..2 {
                let k: Vec<f32> = (0..6).map(|i| (pos * 10 + layer * 100 + i) as f32).collect();
                let v: Vec<f32> = k.iter().map(|x| -x).collect();
                c.append(layer, pos, &k, &v).unwrap();
            }
        }
        let (k, v) = c.read(1, 3).unwrap();
        // head 1 of layer 1 at pos 2: values 100 + 20 + 3..6
        assert_eq!(&k[3 * 3 + 2 * 3..3 * 3 + 3 * 3], &[123.0, 124.0, 125.0]);
        assert_eq!(v[0], -100.0);
        assert_eq!(c.bytes_used(), 2 * 2 * 2 * 3 * 3 * 2);
        assert_eq!(c.decode_bytes_read(2), 2 * 2 * 2 * 3 * 3 * 2);
        assert_eq!(
            c.append(0, 8, &[0.0; 6], &[0.0; 6]),
            Err(StaticCacheError::Full { pos: 8, max_seq_len: 8 })
        );
        assert!(matches!(
            c.append(0, 1, &[0.0; 5], &[0.0; 6]),
            Err(StaticCacheError::BadInput { .. })
        ));
    }
}
