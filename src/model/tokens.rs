//! Tokens: the ids a model reads, and the mapping between text and them.
//!
//! The tiny model reads bytes (`u8`, vocabulary 256); SmolLM2 reads ids of its byte-level BPE vocabulary
//! (`u32`, 49,152). The forward pass, the caches and the lesson drivers are written once over
//! [`TokenId`]; [`Tokenizer`] turns text into ids and back.

/// A token id type the model functions accept.
pub trait TokenId: Copy + Send + Sync + std::fmt::Debug + PartialEq + 'static {
    /// The largest vocabulary this type can index.
    const MAX_VOCAB: usize;
    /// The row of the embedding table.
    fn index(self) -> usize;
    /// The id of row `i` (`i` below [`Self::MAX_VOCAB`]).
    fn from_index(i: usize) -> Self;
}

impl TokenId for u8 {
    const MAX_VOCAB: usize = 256;
    fn index(self) -> usize {
        usize::from(self)
    }
    fn from_index(i: usize) -> Self {
        i as u8
    }
}

impl TokenId for u32 {
    const MAX_VOCAB: usize = u32::MAX as usize;
    fn index(self) -> usize {
        self as usize
    }
    fn from_index(i: usize) -> Self {
        i as u32
    }
}

/// How a model's text becomes ids.
#[derive(Debug, Clone)]
pub enum Tokenizer {
    /// Every byte of the UTF-8 text is a token (the tiny model).
    Bytes,
    /// Byte-level BPE (SmolLM2), built from the vocabulary and merges in the model file by Hugging
    /// Face's `tokenizers` crate.
    #[cfg(feature = "bpe")]
    Bpe(Box<tokenizers::Tokenizer>),
}

impl Tokenizer {
    /// The ids of `text`.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        match self {
            Tokenizer::Bytes => Ok(text.bytes().map(u32::from).collect()),
            #[cfg(feature = "bpe")]
            Tokenizer::Bpe(t) => t
                .encode_fast(text, false)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| format!("the tokenizer failed on the text: {e}")),
        }
    }

    /// The text of `ids` (a byte sequence that is not valid UTF-8 shows U+FFFD for its broken parts).
    pub fn decode(&self, ids: &[u32]) -> String {
        match self {
            Tokenizer::Bytes => {
                let b: Vec<u8> = ids.iter().map(|&i| i as u8).collect();
                String::from_utf8_lossy(&b).into_owned()
            }
            #[cfg(feature = "bpe")]
            Tokenizer::Bpe(t) => t.decode(ids, false).unwrap_or_default(),
        }
    }

    /// The bytes a single id stands for (a BPE piece can end inside a character).
    pub fn piece_bytes(&self, id: u32) -> Vec<u8> {
        match self {
            Tokenizer::Bytes => vec![id as u8],
            #[cfg(feature = "bpe")]
            Tokenizer::Bpe(t) => t.id_to_token(id).map(|p| byte_level_bytes(&p)).unwrap_or_default(),
        }
    }

    /// How many bytes of text `ids` stand for (bits per byte divide a loss by it).
    pub fn byte_count(&self, ids: &[u32]) -> usize {
        match self {
            Tokenizer::Bytes => ids.len(),
            #[cfg(feature = "bpe")]
            Tokenizer::Bpe(_) => ids.iter().map(|&i| self.piece_bytes(i).len()).sum(),
        }
    }

    /// Short labels of `ids`, one per token, for heatmap ticks: for bytes, [`super::tick_labels`]; for a BPE
    /// piece, its text with `‿` for a space and `↵` for a newline, and any byte of a character the piece
    /// does not finish as its hex value.
    pub fn tick_labels(&self, ids: &[u32]) -> Vec<String> {
        match self {
            Tokenizer::Bytes => super::tick_labels(&ids.iter().map(|&i| i as u8).collect::<Vec<u8>>()),
            #[cfg(feature = "bpe")]
            Tokenizer::Bpe(_) => ids.iter().map(|&i| visible(&self.piece_bytes(i), "‿", "↵")).collect(),
        }
    }

    /// A token as a hover names it, quoted: `'a'`, `' the'`, `'\n'` (bytes: [`super::byte_label`]).
    pub fn token_label(&self, id: u32) -> String {
        match self {
            Tokenizer::Bytes => super::byte_label(id as u8),
            #[cfg(feature = "bpe")]
            Tokenizer::Bpe(_) => format!("'{}'", visible(&self.piece_bytes(id), " ", "\\n")),
        }
    }

    /// The id of a one-letter token (`b'a'`..), if the vocabulary has one.
    pub fn letter_id(&self, letter: u8) -> Option<u32> {
        match self {
            Tokenizer::Bytes => Some(u32::from(letter)),
            #[cfg(feature = "bpe")]
            Tokenizer::Bpe(t) => t.token_to_id(&char::from(letter).to_string()),
        }
    }

    /// What the tokenizer is, in a few words (for manifests).
    pub fn describe(&self) -> &'static str {
        match self {
            Tokenizer::Bytes => "bytes of the UTF-8 text",
            #[cfg(feature = "bpe")]
            Tokenizer::Bpe(_) => {
                "byte-level BPE from the file's vocabulary and merges; pre-tokenizer `smollm` (every digit alone, \
                 then GPT-2's regex); no BOS"
            }
        }
    }
}

/// `bytes` as text: whole characters as they are (a space as `space`, a newline as `newline`, another
/// control character as its hex value), a byte of an unfinished character as its hex value.
#[cfg(feature = "bpe")]
fn visible(bytes: &[u8], space: &str, newline: &str) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                ' ' => out.push_str(space),
                '\n' => out.push_str(newline),
                c if c.is_control() => out.push_str(&format!("{:02x}", c as u32)),
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("{b:02x}"));
        }
    }
    out
}

/// GPT-2's byte-level alphabet: byte `b` is written as one printable character (`bytes_to_unicode`
/// in OpenAI's `encoder.py`): the printable Latin-1 bytes as themselves, the others as U+0100 onwards.
pub fn byte_level_char(b: u8) -> char {
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xa1..=0xac).contains(&b) || (0xae..=0xff).contains(&b);
    if printable(b) {
        return char::from(b);
    }
    let n = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + n).unwrap_or('?')
}

/// The bytes of a byte-level piece (`Ġthe` → ` the`); a character outside the alphabet is kept as UTF-8.
pub fn byte_level_bytes(piece: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for ch in piece.chars() {
        match (0..=255u8).find(|&b| byte_level_char(b) == ch) {
            Some(b) => out.push(b),
            None => out.extend_from_slice(ch.to_string().as_bytes()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_level_alphabet_maps_space_to_g_dot_and_is_a_bijection() {
        assert_eq!(byte_level_char(b' '), 'Ġ');
        assert_eq!(byte_level_char(b'\n'), 'Ċ');
        assert_eq!(byte_level_char(b'a'), 'a');
        let all: std::collections::BTreeSet<char> = (0..=255u8).map(byte_level_char).collect();
        assert_eq!(all.len(), 256);
        assert_eq!(byte_level_bytes("Ġthe"), b" the");
    }
}
