//! The `.npy` header: magic, version, header length, and the Python-literal dict
//! `{'descr': …, 'fortran_order': …, 'shape': (…)}`.
//!
//! The dict is parsed here rather than by `npyz::NpyHeader::from_reader` because that reader
//! allocates the header buffer from the declared length before checking it against the file,
//! multiplies the shape without overflow checks, and parses with a recursive grammar that has no
//! depth limit. This parser is bounded: the header must lie inside the bytes at hand, at most
//! [`MAX_HEADER_LEN`] long, nested at most [`MAX_DEPTH`] deep, and every integer must fit a `u64`.
//! The dtype itself is still described with npyz's [`DType`] / [`TypeStr`] (type strings are
//! parsed and validated by npyz).

use npyz::{DType, Field, TypeStr};
use tet_source::{Result, SourceError};

/// The magic string every `.npy` file starts with.
pub(crate) const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Largest header (dict text) accepted, in bytes. numpy itself refuses headers over 10 000 bytes
/// unless told otherwise; this leaves room for very wide record dtypes.
pub(crate) const MAX_HEADER_LEN: usize = 1 << 20;

/// Deepest nesting of tuples/lists/dicts accepted in the header.
const MAX_DEPTH: usize = 32;

/// Bytes needed to know the header extent (magic, version and the longest length field).
pub(crate) const PREAMBLE_LEN: usize = 12;

/// A parsed `.npy` header.
#[derive(Debug, Clone)]
pub(crate) struct Header {
    /// Offset of the first data byte from the start of the file.
    pub data_offset: usize,
    /// The element type, as npyz models it.
    pub dtype: DType,
    /// The `descr` as it appeared (for messages).
    pub descr_text: String,
    /// Whether the data is in Fortran (column-major) order.
    pub fortran_order: bool,
    /// The shape; empty for a 0-d array.
    pub shape: Vec<u64>,
}

/// From the first bytes of a `.npy` payload (at least [`PREAMBLE_LEN`] of them, or all there
/// are), the offset where the data starts, i.e. the length of magic + version + length field +
/// header text. Fails on a wrong magic, an unknown version or an oversized header.
pub(crate) fn header_extent(bytes: &[u8]) -> Result<(usize, (u8, u8))> {
    if bytes.len() < 8 || &bytes[..6] != MAGIC {
        return Err(SourceError::malformed(
            "not an .npy file: the \\x93NUMPY magic is missing",
        ));
    }
    let version = (bytes[6], bytes[7]);
    let (len_size, len) = match version {
        (1, 0) => {
            let b = bytes.get(8..10).ok_or_else(|| {
                SourceError::malformed("truncated .npy: header length is cut off")
            })?;
            (2, u16::from_le_bytes([b[0], b[1]]) as usize)
        }
        (2, 0) | (3, 0) => {
            let b = bytes.get(8..12).ok_or_else(|| {
                SourceError::malformed("truncated .npy: header length is cut off")
            })?;
            let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            (4, usize::try_from(len).unwrap_or(usize::MAX))
        }
        (major, minor) => {
            return Err(SourceError::unsupported(format!(
                ".npy format version {major}.{minor} (known: 1.0, 2.0, 3.0)"
            )))
        }
    };
    if len > MAX_HEADER_LEN {
        return Err(SourceError::unsupported(format!(
            ".npy header of {len} bytes exceeds the {MAX_HEADER_LEN}-byte limit"
        )));
    }
    Ok((8 + len_size + len, version))
}

/// Parses the header at the start of `bytes`, which must hold at least the whole header.
pub(crate) fn parse_header(bytes: &[u8]) -> Result<Header> {
    let (data_offset, version) = header_extent(bytes)?;
    let text_start = if version.0 == 1 { 10 } else { 12 };
    let raw = bytes.get(text_start..data_offset).ok_or_else(|| {
        SourceError::malformed(format!(
            "truncated .npy: header declares {} bytes of header text but only {} follow",
            data_offset - text_start,
            bytes.len().saturating_sub(text_start)
        ))
    })?;
    // Versions 1 and 2 are latin-1, version 3 is UTF-8.
    let text: Vec<char> = if version.0 == 3 {
        std::str::from_utf8(raw)
            .map_err(|_| SourceError::malformed(".npy v3 header is not valid UTF-8"))?
            .chars()
            .collect()
    } else {
        raw.iter().map(|&b| char::from(b)).collect()
    };
    let lit = Parser::new(&text).parse_all()?;
    let Lit::Dict(entries) = lit else {
        return Err(SourceError::malformed(
            ".npy header is not a Python dict literal",
        ));
    };
    let get = |key: &str| {
        entries
            .iter()
            .find(|(k, _)| matches!(k, Lit::Str(s) if s == key))
            .map(|(_, v)| v)
            .ok_or_else(|| SourceError::malformed(format!(".npy header has no '{key}' key")))
    };
    let fortran_order = match get("fortran_order")? {
        Lit::Bool(b) => *b,
        _ => {
            return Err(SourceError::malformed(
                ".npy header: 'fortran_order' is not True/False",
            ))
        }
    };
    let shape = match get("shape")? {
        Lit::Seq(items) => items
            .iter()
            .map(|v| match v {
                Lit::Int { neg: false, val } => Ok(*val),
                _ => Err(SourceError::malformed(
                    ".npy header: 'shape' holds something other than a non-negative integer",
                )),
            })
            .collect::<Result<Vec<u64>>>()?,
        _ => {
            return Err(SourceError::malformed(
                ".npy header: 'shape' is not a tuple",
            ))
        }
    };
    let descr = get("descr")?;
    let descr_text = descr.to_python();
    let dtype = descr_to_dtype(descr)?;
    Ok(Header {
        data_offset,
        dtype,
        descr_text,
        fortran_order,
        shape,
    })
}

/// Converts a `descr` literal into npyz's [`DType`].
fn descr_to_dtype(descr: &Lit) -> Result<DType> {
    match descr {
        Lit::Str(s) => {
            let ts: TypeStr = s.parse().map_err(|e| {
                SourceError::unsupported(format!("dtype '{s}' is not understood ({e})"))
            })?;
            Ok(DType::Plain(ts))
        }
        Lit::Seq(items) => {
            let mut fields = Vec::with_capacity(items.len());
            for item in items {
                let Lit::Seq(parts) = item else {
                    return Err(SourceError::malformed(
                        ".npy header: a record descr entry is not a tuple",
                    ));
                };
                if !(2..=3).contains(&parts.len()) {
                    return Err(SourceError::malformed(
                        ".npy header: a record descr entry must have 2 or 3 items",
                    ));
                }
                let name = match &parts[0] {
                    Lit::Str(s) => s.clone(),
                    // `(title, name)`: numpy's titled fields.
                    Lit::Seq(tn) if tn.len() == 2 => match &tn[1] {
                        Lit::Str(s) => s.clone(),
                        _ => {
                            return Err(SourceError::malformed(
                                ".npy header: a record field name is not a string",
                            ))
                        }
                    },
                    _ => {
                        return Err(SourceError::malformed(
                            ".npy header: a record field name is not a string",
                        ))
                    }
                };
                let mut dtype = descr_to_dtype(&parts[1])?;
                if let Some(shape) = parts.get(2) {
                    let dims: Vec<u64> = match shape {
                        Lit::Int { neg: false, val } => vec![*val],
                        Lit::Seq(ds) => ds
                            .iter()
                            .map(|d| match d {
                                Lit::Int { neg: false, val } => Ok(*val),
                                _ => Err(SourceError::malformed(
                                    ".npy header: a sub-array shape holds a non-integer",
                                )),
                            })
                            .collect::<Result<_>>()?,
                        _ => {
                            return Err(SourceError::malformed(
                                ".npy header: a sub-array shape is not a tuple",
                            ))
                        }
                    };
                    for &d in dims.iter().rev() {
                        dtype = DType::Array(d, Box::new(dtype));
                    }
                }
                fields.push(Field { name, dtype });
            }
            Ok(DType::Record(fields))
        }
        _ => Err(SourceError::malformed(
            ".npy header: 'descr' is neither a type string nor a list of fields",
        )),
    }
}

/// A Python literal, as far as `.npy` headers use them.
#[derive(Debug, Clone, PartialEq)]
enum Lit {
    Str(String),
    Int {
        neg: bool,
        val: u64,
    },
    Bool(bool),
    None,
    /// A tuple or a list.
    Seq(Vec<Lit>),
    Dict(Vec<(Lit, Lit)>),
}

impl Lit {
    /// A short Python rendering, for messages.
    fn to_python(&self) -> String {
        match self {
            Lit::Str(s) => format!("'{s}'"),
            Lit::Int { neg, val } => format!("{}{val}", if *neg { "-" } else { "" }),
            Lit::Bool(true) => "True".into(),
            Lit::Bool(false) => "False".into(),
            Lit::None => "None".into(),
            Lit::Seq(items) => {
                let inner: Vec<String> = items.iter().map(Lit::to_python).collect();
                format!("({})", inner.join(", "))
            }
            Lit::Dict(entries) => {
                let inner: Vec<String> = entries
                    .iter()
                    .map(|(k, v)| format!("{}: {}", k.to_python(), v.to_python()))
                    .collect();
                format!("{{{}}}", inner.join(", "))
            }
        }
    }
}

/// A small recursive-descent parser for the header literal, with a depth limit.
struct Parser<'a> {
    s: &'a [char],
    pos: usize,
}

fn syntax(msg: &str) -> SourceError {
    SourceError::malformed(format!(".npy header is not a valid Python literal: {msg}"))
}

impl<'a> Parser<'a> {
    fn new(s: &'a [char]) -> Self {
        Parser { s, pos: 0 }
    }

    fn parse_all(mut self) -> Result<Lit> {
        let v = self.value(0)?;
        self.skip_ws();
        if self.pos != self.s.len() {
            return Err(syntax("unexpected text after the dict"));
        }
        Ok(v)
    }

    fn peek(&self) -> Option<char> {
        self.s.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.peek() {
            if matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c' | '\0') {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Lit> {
        if depth > MAX_DEPTH {
            return Err(syntax("nested too deeply"));
        }
        self.skip_ws();
        let c = self.peek().ok_or_else(|| syntax("unexpected end"))?;
        match c {
            '{' => {
                self.pos += 1;
                let mut entries = Vec::new();
                loop {
                    self.skip_ws();
                    if self.peek() == Some('}') {
                        self.pos += 1;
                        return Ok(Lit::Dict(entries));
                    }
                    let k = self.value(depth + 1)?;
                    self.skip_ws();
                    if self.peek() != Some(':') {
                        return Err(syntax("expected ':' in dict"));
                    }
                    self.pos += 1;
                    let v = self.value(depth + 1)?;
                    entries.push((k, v));
                    self.skip_ws();
                    match self.peek() {
                        Some(',') => self.pos += 1,
                        Some('}') => {}
                        _ => return Err(syntax("expected ',' or '}' in dict")),
                    }
                }
            }
            '(' | '[' => {
                let close = if c == '(' { ')' } else { ']' };
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_ws();
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        return Ok(Lit::Seq(items));
                    }
                    items.push(self.value(depth + 1)?);
                    self.skip_ws();
                    match self.peek() {
                        Some(',') => self.pos += 1,
                        Some(x) if x == close => {}
                        _ => return Err(syntax("expected ',' or a closing bracket")),
                    }
                }
            }
            '\'' | '"' => self.string(),
            'u' | 'U' | 'b' | 'B' if matches!(self.s.get(self.pos + 1), Some('\'') | Some('"')) => {
                self.pos += 1;
                self.string()
            }
            '-' | '+' | '0'..='9' => self.int(),
            _ => {
                let word: String = self.s[self.pos..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
                    .collect();
                let lit = match word.as_str() {
                    "True" => Lit::Bool(true),
                    "False" => Lit::Bool(false),
                    "None" => Lit::None,
                    _ => return Err(syntax("unexpected token")),
                };
                self.pos += word.len();
                Ok(lit)
            }
        }
    }

    fn int(&mut self) -> Result<Lit> {
        let mut neg = false;
        while let Some(c @ ('-' | '+')) = self.peek() {
            if c == '-' {
                neg = !neg;
            }
            self.pos += 1;
            self.skip_ws();
        }
        let mut val: u64 = 0;
        let mut digits = 0usize;
        while let Some(c) = self.peek() {
            if let Some(d) = c.to_digit(10) {
                val = val
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(u64::from(d)))
                    .ok_or_else(|| syntax("integer too large"))?;
                digits += 1;
                self.pos += 1;
            } else if c == '_' && digits > 0 {
                self.pos += 1;
            } else {
                break;
            }
        }
        if digits == 0 {
            return Err(syntax("expected digits"));
        }
        // Python 2 long suffix, as in headers numpy wrote under Python 2: `(3L, 4L)`.
        if matches!(self.peek(), Some('L') | Some('l')) {
            self.pos += 1;
        }
        if matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == '.') {
            return Err(syntax("only integers are expected in a header"));
        }
        Ok(Lit::Int { neg, val })
    }

    fn string(&mut self) -> Result<Lit> {
        let q = self.peek().ok_or_else(|| syntax("unexpected end"))?;
        let triple = self.s.get(self.pos + 1) == Some(&q) && self.s.get(self.pos + 2) == Some(&q);
        self.pos += if triple { 3 } else { 1 };
        let mut out = String::new();
        loop {
            let c = self.peek().ok_or_else(|| syntax("unterminated string"))?;
            self.pos += 1;
            if c == q {
                if !triple {
                    return Ok(Lit::Str(out));
                }
                if self.s.get(self.pos) == Some(&q) && self.s.get(self.pos + 1) == Some(&q) {
                    self.pos += 2;
                    return Ok(Lit::Str(out));
                }
                out.push(c);
            } else if c == '\\' {
                let e = self.peek().ok_or_else(|| syntax("unterminated string"))?;
                self.pos += 1;
                match e {
                    '\\' => out.push('\\'),
                    '\'' => out.push('\''),
                    '"' => out.push('"'),
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'a' => out.push('\x07'),
                    'b' => out.push('\x08'),
                    'f' => out.push('\x0c'),
                    'v' => out.push('\x0b'),
                    '\n' => {}
                    'x' => out.push(self.hex_escape(2)?),
                    'u' => out.push(self.hex_escape(4)?),
                    'U' => out.push(self.hex_escape(8)?),
                    '0'..='7' => {
                        let mut v = e.to_digit(8).unwrap_or(0);
                        for _ in 0..2 {
                            match self.peek().and_then(|c| c.to_digit(8)) {
                                Some(d) => {
                                    v = v * 8 + d;
                                    self.pos += 1;
                                }
                                None => break,
                            }
                        }
                        out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                    }
                    other => {
                        out.push('\\');
                        out.push(other);
                    }
                }
            } else if !triple && c == '\n' {
                return Err(syntax("newline inside a string"));
            } else {
                out.push(c);
            }
        }
    }

    fn hex_escape(&mut self, n: usize) -> Result<char> {
        let mut v: u32 = 0;
        for _ in 0..n {
            let d = self
                .peek()
                .and_then(|c| c.to_digit(16))
                .ok_or_else(|| syntax("bad hex escape"))?;
            v = v.wrapping_mul(16).wrapping_add(d);
            self.pos += 1;
        }
        char::from_u32(v).ok_or_else(|| syntax("escape is not a valid character"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(header: &str) -> Vec<u8> {
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&[1, 0]);
        v.extend_from_slice(&(header.len() as u16).to_le_bytes());
        v.extend_from_slice(header.as_bytes());
        v
    }

    #[test]
    fn parses_plain_header() {
        let h = parse_header(&npy(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }          \n",
        ))
        .unwrap();
        assert_eq!(h.shape, vec![3, 4]);
        assert!(!h.fortran_order);
        assert_eq!(h.dtype, DType::Plain("<f8".parse().unwrap()));
    }

    #[test]
    fn parses_record_header() {
        let h = parse_header(&npy(
            "{'descr': [('a', '<i4'), ('b', [('c', '>f4', (2, 3))]), (('t', 'd'), '|b1')], 'fortran_order': True, 'shape': (5L,)}",
        ))
        .unwrap();
        assert_eq!(h.shape, vec![5]);
        assert!(h.fortran_order);
        let DType::Record(fields) = &h.dtype else {
            panic!()
        };
        assert_eq!(fields.len(), 3);
        assert_eq!(fields[2].name, "d");
        assert_eq!(h.dtype.num_bytes(), Some(4 + 24 + 1));
    }

    #[test]
    fn rejects_bad_headers() {
        for h in [
            "{'descr': '<f8', 'fortran_order': False}",
            "{'descr': '<f8', 'fortran_order': 0, 'shape': ()}",
            "{'descr': '<f8', 'fortran_order': False, 'shape': (-1,)}",
            "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,)}",
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1.5,)}",
            "[1, 2]",
            "{'descr': '<f8'",
        ] {
            assert!(parse_header(&npy(h)).is_err(), "{h}");
        }
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let deep = format!("{{'descr': {deep}, 'fortran_order': False, 'shape': ()}}");
        assert!(parse_header(&npy(&deep)).is_err());
    }
}
