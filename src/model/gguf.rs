//! A GGUF file (llama.cpp's container, versions 2 and 3) read from its bytes: the metadata, the tensors'
//! descriptions, and each tensor's data, with every length, count and offset checked against the file
//! before anything is read, so that a truncated or damaged file is an error and never a panic.
//!
//! The layout (little-endian), from ggml's `docs/gguf.md`: the magic `GGUF`, a `u32` version, a `u64`
//! tensor count and a `u64` metadata count; the metadata as (key string, `u32` value type, value); then
//! per tensor its name, a `u32` number of dimensions, the dimensions as `u64` **innermost first** (a
//! `[576, 192]` tensor is 192 rows of 576), a `u32` ggml type and a `u64` offset into the data section,
//! which starts at the next multiple of `general.alignment` (32 when absent). A string is a `u64` length
//! and that many UTF-8 bytes, without a terminator.
//!
//! The `ggus` crate reads the same container, but its `GGuf::new` slices the data section to the end of
//! the last tensor without checking that the file is that long (a truncated file panics), so kvscope
//! reads it here; the dequantisation of the two block formats SmolLM2's file uses is short and is here too.

use std::collections::BTreeMap;

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Any unsigned integer type (`u8`, `u16`, `u32`, `u64`).
    U(u64),
    /// Any signed integer type.
    I(i64),
    /// `f32` or `f64`.
    F(f64),
    /// A boolean.
    Bool(bool),
    /// A UTF-8 string.
    Str(String),
    /// An array (of one type).
    Array(Vec<Value>),
}

impl Value {
    /// The value as an unsigned integer, if it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U(v) => Some(v),
            Value::I(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a float, if it is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::U(v) => Some(v as f64),
            Value::I(v) => Some(v as f64),
            Value::F(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// The ggml tensor types kvscope reads (the others are refused by name and number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgmlType {
    /// 32-bit float.
    F32,
    /// 16-bit float.
    F16,
    /// Blocks of 32: an f16 scale `d`, an f16 minimum `m`, 16 bytes of 4-bit codes; `x = d·q + m`.
    Q4_1,
    /// Blocks of 32: an f16 scale `d` and 32 `i8` codes; `x = d·q`.
    Q8_0,
}

impl GgmlType {
    /// The type of ggml's number `n` (`ggml.h`'s `enum ggml_type`), or why kvscope cannot read it.
    pub fn from_number(n: u32) -> Result<Self, String> {
        Ok(match n {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            3 => GgmlType::Q4_1,
            8 => GgmlType::Q8_0,
            2 => return Err("type Q4_0 (2), which kvscope does not read".into()),
            6 | 7 | 9 => return Err(format!("type Q5/Q8_1 ({n}), which kvscope does not read")),
            10..=15 => return Err(format!("a k-quant type ({n}), which kvscope does not read")),
            30 => return Err("type BF16 (30), which kvscope does not read".into()),
            _ => return Err(format!("ggml type {n}, which kvscope does not read")),
        })
    }

    /// Values per block and bytes per block.
    pub fn block(self) -> (usize, usize) {
        match self {
            GgmlType::F32 => (1, 4),
            GgmlType::F16 => (1, 2),
            GgmlType::Q4_1 => (32, 20),
            GgmlType::Q8_0 => (32, 34),
        }
    }

    /// Its name as ggml writes it.
    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "F32",
            GgmlType::F16 => "F16",
            GgmlType::Q4_1 => "Q4_1",
            GgmlType::Q8_0 => "Q8_0",
        }
    }
}

/// One tensor's description.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    /// Its name.
    pub name: String,
    /// Dimensions, innermost first (as the file lists them).
    pub dims: Vec<usize>,
    /// Its type.
    pub kind: GgmlType,
    /// Where its data starts in the file (absolute, checked to lie inside it).
    pub start: usize,
    /// Its data's length in bytes.
    pub len: usize,
}

impl TensorInfo {
    /// Number of values.
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }
}

/// A parsed file: metadata and tensor descriptions; the data stays in the caller's bytes.
#[derive(Debug, Clone)]
pub struct Gguf {
    /// The format version (2 or 3).
    pub version: u32,
    /// Metadata by key.
    pub meta: BTreeMap<String, Value>,
    /// Tensors in file order.
    pub tensors: Vec<TensorInfo>,
}

/// A cursor over the file that never reads past its end.
struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.b.len()).ok_or_else(|| {
            format!(
                "truncated: {what} at byte {} needs {n} bytes, the file has {} in all",
                self.pos,
                self.b.len()
            )
        })?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count that must fit in what is left of the file at `min_each` bytes per item.
    fn count(&mut self, min_each: usize, what: &str) -> Result<usize, String> {
        let n = self.u64(what)?;
        let left = (self.b.len() - self.pos) as u64;
        if n.saturating_mul(min_each.max(1) as u64) > left {
            return Err(format!(
                "{what} says {n}, more than the {left} bytes left in the file could hold (truncated or damaged)"
            ));
        }
        Ok(n as usize)
    }

    fn string(&mut self, what: &str) -> Result<String, String> {
        let n = self.count(1, &format!("the length of {what}"))?;
        let s = self.take(n, what)?;
        String::from_utf8(s.to_vec()).map_err(|_| format!("{what} at byte {} is not UTF-8", self.pos - n))
    }

    fn value(&mut self, ty: u32, what: &str, depth: usize) -> Result<Value, String> {
        Ok(match ty {
            0 => Value::U(u64::from(self.array::<1>(what)?[0])),
            1 => Value::I(i64::from(self.array::<1>(what)?[0] as i8)),
            2 => Value::U(u64::from(u16::from_le_bytes(self.array(what)?))),
            3 => Value::I(i64::from(i16::from_le_bytes(self.array(what)?))),
            4 => Value::U(u64::from(self.u32(what)?)),
            5 => Value::I(i64::from(i32::from_le_bytes(self.array(what)?))),
            6 => Value::F(f64::from(f32::from_le_bytes(self.array(what)?))),
            7 => match self.array::<1>(what)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(format!("{what}: boolean byte {b}")),
            },
            8 => Value::Str(self.string(what)?),
            9 => {
                if depth > 0 {
                    return Err(format!("{what}: an array of arrays, which kvscope does not read"));
                }
                let inner = self.u32(what)?;
                let n = self.count(1, &format!("the length of {what}"))?;
                let mut v = Vec::with_capacity(n.min(1 << 20));
                for _ in 0..n {
                    v.push(self.value(inner, what, depth + 1)?);
                }
                Value::Array(v)
            }
            10 => Value::U(self.u64(what)?),
            11 => Value::I(i64::from_le_bytes(self.array(what)?)),
            12 => Value::F(f64::from_le_bytes(self.array(what)?)),
            t => return Err(format!("{what}: unknown value type {t}")),
        })
    }
}

/// The GGUF magic: the bytes `GGUF`.
pub const MAGIC: &[u8; 4] = b"GGUF";

impl Gguf {
    /// Parse `bytes`: header, metadata and tensor descriptions, every tensor's data range checked to lie
    /// inside the file, aligned, and not overlapping the next.
    pub fn parse(bytes: &[u8]) -> Result<Gguf, String> {
        let mut r = Reader { b: bytes, pos: 0 };
        let magic = r.take(4, "the magic")?;
        if magic != MAGIC {
            return Err(format!(
                "not a GGUF file: it starts with {magic:02x?}, a GGUF file with the bytes `GGUF`"
            ));
        }
        let version = r.u32("the version")?;
        if version != 2 && version != 3 {
            return Err(format!("GGUF version {version}: kvscope reads versions 2 and 3"));
        }
        // A tensor description takes at least 8 + 4 + 8 + 4 + 8 bytes, a metadata entry 8 + 4 + 1.
        let n_tensors = r.count(32, "the tensor count")?;
        let n_meta = r.count(13, "the metadata count")?;
        let mut meta = BTreeMap::new();
        for i in 0..n_meta {
            let key = r.string(&format!("metadata key {i}"))?;
            let ty = r.u32(&format!("the type of `{key}`"))?;
            let v = r.value(ty, &format!("metadata `{key}`"), 0)?;
            if meta.insert(key.clone(), v).is_some() {
                return Err(format!("metadata `{key}` appears twice"));
            }
        }
        let alignment = match meta.get("general.alignment") {
            None => 32,
            Some(v) => match v.as_u64() {
                Some(a) if a > 0 && a.is_power_of_two() && a <= 1 << 20 => a as usize,
                _ => return Err(format!("metadata `general.alignment` = {v:?}: not a power of two")),
            },
        };
        let mut raw = Vec::with_capacity(n_tensors);
        for i in 0..n_tensors {
            let name = r.string(&format!("the name of tensor {i}"))?;
            let nd = r.u32(&format!("the dimension count of `{name}`"))? as usize;
            if nd == 0 || nd > 4 {
                return Err(format!("tensor `{name}`: {nd} dimensions (ggml has 1 to 4)"));
            }
            let mut dims = Vec::with_capacity(nd);
            for _ in 0..nd {
                let d = r.u64(&format!("a dimension of `{name}`"))?;
                dims.push(usize::try_from(d).map_err(|_| format!("tensor `{name}`: dimension {d} too large"))?);
            }
            let ty = r.u32(&format!("the type of `{name}`"))?;
            let kind = GgmlType::from_number(ty).map_err(|e| format!("tensor `{name}`: {e}"))?;
            let offset = r.u64(&format!("the offset of `{name}`"))?;
            raw.push((name, dims, kind, offset));
        }
        let data_start = r.pos.div_ceil(alignment) * alignment;
        let mut tensors = Vec::with_capacity(raw.len());
        for (name, dims, kind, offset) in raw {
            let (per_block, block_bytes) = kind.block();
            let numel = dims
                .iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .ok_or_else(|| format!("tensor `{name}`: dimensions {dims:?} overflow"))?;
            if dims[0] % per_block != 0 {
                return Err(format!(
                    "tensor `{name}`: its rows of {} values are not whole {} blocks of {per_block}",
                    dims[0],
                    kind.name()
                ));
            }
            let len = numel / per_block * block_bytes;
            let start = usize::try_from(offset)
                .ok()
                .and_then(|o| o.checked_add(data_start))
                .filter(|_| offset.is_multiple_of(alignment as u64))
                .ok_or_else(|| format!("tensor `{name}`: offset {offset} is not aligned to {alignment}"))?;
            let end = start.saturating_add(len);
            if end > bytes.len() {
                return Err(format!(
                    "truncated: tensor `{name}` ({} {dims:?}) needs bytes {start}..{end}, the file has {}",
                    kind.name(),
                    bytes.len()
                ));
            }
            if tensors.iter().any(|t: &TensorInfo| t.name == name) {
                return Err(format!("tensor `{name}` appears twice"));
            }
            tensors.push(TensorInfo {
                name,
                dims,
                kind,
                start,
                len,
            });
        }
        let mut by_start: Vec<&TensorInfo> = tensors.iter().collect();
        by_start.sort_by_key(|t| t.start);
        for w in by_start.windows(2) {
            if w[0].start + w[0].len > w[1].start {
                return Err(format!("tensors `{}` and `{}` overlap", w[0].name, w[1].name));
            }
        }
        Ok(Gguf { version, meta, tensors })
    }

    /// A tensor's description by name.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

fn f16_at(b: &[u8], i: usize) -> f32 {
    half::f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

/// The values of a tensor's data `raw` (its `len` bytes), dequantised to f32 in file order: ggml's
/// `dequantize_row_q4_1` and `dequantize_row_q8_0` (`ggml-quants.c`), in f32.
pub fn dequantize(kind: GgmlType, raw: &[u8], out: &mut [f32]) {
    match kind {
        GgmlType::F32 => {
            for (o, c) in out.iter_mut().zip(raw.chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        GgmlType::F16 => {
            for (o, c) in out.iter_mut().zip(raw.chunks_exact(2)) {
                *o = half::f16::from_le_bytes([c[0], c[1]]).to_f32();
            }
        }
        GgmlType::Q4_1 => {
            for (o, blk) in out.chunks_exact_mut(32).zip(raw.chunks_exact(20)) {
                let (d, m) = (f16_at(blk, 0), f16_at(blk, 2));
                for j in 0..16 {
                    let q = blk[4 + j];
                    o[j] = f32::from(q & 0x0f) * d + m;
                    o[j + 16] = f32::from(q >> 4) * d + m;
                }
            }
        }
        GgmlType::Q8_0 => {
            for (o, blk) in out.chunks_exact_mut(32).zip(raw.chunks_exact(34)) {
                let d = f16_at(blk, 0);
                for j in 0..32 {
                    o[j] = f32::from(blk[2 + j] as i8) * d;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small file: two metadata entries and one Q8_0 tensor of one block.
    fn tiny_file() -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(b"GGUF");
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&1u64.to_le_bytes());
        b.extend_from_slice(&2u64.to_le_bytes());
        let s = |b: &mut Vec<u8>, s: &str| {
            b.extend_from_slice(&(s.len() as u64).to_le_bytes());
            b.extend_from_slice(s.as_bytes());
        };
        s(&mut b, "general.architecture");
        b.extend_from_slice(&8u32.to_le_bytes());
        s(&mut b, "llama");
        s(&mut b, "x.list");
        b.extend_from_slice(&9u32.to_le_bytes());
        b.extend_from_slice(&4u32.to_le_bytes());
        b.extend_from_slice(&2u64.to_le_bytes());
        b.extend_from_slice(&7u32.to_le_bytes());
        b.extend_from_slice(&9u32.to_le_bytes());
        s(&mut b, "w");
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&32u64.to_le_bytes());
        b.extend_from_slice(&8u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        while !b.len().is_multiple_of(32) {
            b.push(0);
        }
        b.extend_from_slice(&half::f16::from_f32(0.5).to_le_bytes());
        b.extend((0..32).map(|i| (i as i8 - 16) as u8));
        b
    }

    #[test]
    fn a_small_file_parses_and_dequantises() {
        let b = tiny_file();
        let g = Gguf::parse(&b).unwrap();
        assert_eq!(g.meta["general.architecture"].as_str(), Some("llama"));
        assert_eq!(g.meta["x.list"], Value::Array(vec![Value::U(7), Value::U(9)]));
        let t = g.tensor("w").unwrap();
        assert_eq!((t.kind, t.len, t.dims.clone()), (GgmlType::Q8_0, 34, vec![32]));
        let mut out = vec![0f32; 32];
        dequantize(t.kind, &b[t.start..t.start + t.len], &mut out);
        assert_eq!(out[0], -8.0);
        assert_eq!(out[31], 7.5);
    }

    #[test]
    fn every_truncation_and_a_wrong_magic_are_errors_not_panics() {
        let b = tiny_file();
        for n in 0..b.len() {
            let e = Gguf::parse(&b[..n]).unwrap_err();
            assert!(e.contains("truncated") || e.contains("more than"), "{n} bytes: {e}");
        }
        let mut bad = b.clone();
        bad[0] = b'X';
        assert!(Gguf::parse(&bad).unwrap_err().contains("not a GGUF file"));
        let mut v9 = b.clone();
        v9[4] = 9;
        assert!(Gguf::parse(&v9).unwrap_err().contains("version 9"));
    }

    #[test]
    fn q4_1_low_nibbles_are_the_first_sixteen_values() {
        let mut blk = Vec::new();
        blk.extend_from_slice(&half::f16::from_f32(2.0).to_le_bytes());
        blk.extend_from_slice(&half::f16::from_f32(-1.0).to_le_bytes());
        blk.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
        let mut out = vec![0f32; 32];
        dequantize(GgmlType::Q4_1, &blk, &mut out);
        assert_eq!(out[3], 2.0 * 3.0 - 1.0);
        assert_eq!(out[16 + 3], 2.0 * 12.0 - 1.0);
    }
}
