//! The `.npy` header: magic, version, header length, and the Python-literal dict
//! `{'descr': …, 'fortran_order': …, 'shape': (…)}`.
//!
//! The dict is parsed here rather than by `npyz::NpyHeader::from_reader` because that reader
//! allocates the header buffer from the declared length before checking it against the file,
//! multiplies the shape without overflow checks, and parses with a recursive grammar that has no
//! depth limit. This parser is bounded: the header must lie inside the bytes at hand, at most
//! [`MAX_HEADER_LEN`] long, nested at most [`MAX_DEPTH`] deep, and every integer must fit a `u64`.
//! The dtype itself is still described with npyz's [`DType`] / [`TypeStr`] (type strings are
//! parsed and validated by npyz) inside this crate's [`Dtype`], which adds what npyz's model
//! lacks: the `=` (native) and `|` byte-order spellings numpy accepts for any type, and
//! datetime64/timedelta64 units with a multiplier (`[10ms]`, `[15m]`).

use npyz::{TypeChar, TypeStr};
use tet_source::{Feature, Part, Result, SourceError};

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
    /// The element type.
    pub dtype: Dtype,
    /// The `descr` as it appeared (for messages).
    pub descr_text: String,
    /// Whether the data is in Fortran (column-major) order.
    pub fortran_order: bool,
    /// The shape; empty for a 0-d array.
    pub shape: Vec<u64>,
}

/// A numpy dtype as an `.npy` header describes it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Dtype {
    Plain(Plain),
    /// A sub-array: `n` elements of the inner type.
    Array(u64, Box<Dtype>),
    Record(Vec<Field>),
}

/// One field of a record dtype.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Field {
    /// The name as the header gives it (may be empty: see `fields.rs`).
    pub name: String,
    pub dtype: Dtype,
}

/// A scalar type string.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plain {
    /// The type, with `=` and a multi-byte `|` resolved to this machine's byte order and the
    /// time-unit multiplier removed.
    pub ts: TypeStr,
    /// The multiplier of a datetime64/timedelta64 unit (`10` for `[10ms]`); 1 otherwise.
    pub time_mult: u64,
}

impl Dtype {
    /// Bytes of one element, `None` on overflow or for a pickled object.
    pub fn num_bytes(&self) -> Option<usize> {
        match self {
            Dtype::Plain(p) => p.ts.num_bytes(),
            Dtype::Array(n, inner) => inner.num_bytes()?.checked_mul(usize::try_from(*n).ok()?),
            Dtype::Record(fields) => fields
                .iter()
                .try_fold(0usize, |a, f| a.checked_add(f.dtype.num_bytes()?)),
        }
    }

    /// Whether the dtype holds a pickled Python object (`O`) anywhere.
    pub fn uses_pickled_array(&self) -> bool {
        match self {
            Dtype::Plain(p) => p.ts.uses_pickled_array(),
            Dtype::Array(_, inner) => inner.uses_pickled_array(),
            Dtype::Record(fields) => fields.iter().any(|f| f.dtype.uses_pickled_array()),
        }
    }
}

/// This machine's byte order, which numpy's `=` (and a multi-byte `|`) stands for.
const NATIVE: char = if cfg!(target_endian = "big") {
    '>'
} else {
    '<'
};

/// Parses a numpy type string (`<f8`, `=i4`, `|S5`, `<U3`, `>M8[10ms]`, `f8`).
pub(crate) fn parse_type_str(s: &str) -> Result<Plain> {
    let bad =
        |why: &str| Feature::DataType.unsupported(format!("dtype '{s}' is not understood ({why})"));
    let mut chars = s.chars().peekable();
    let order = match chars.peek() {
        Some(&c @ ('<' | '>' | '=' | '|')) => {
            chars.next();
            c
        }
        // numpy also accepts a type string without a byte-order character: native.
        _ => '=',
    };
    let type_char = chars.next().ok_or_else(|| bad("no type character"))?;
    let tc = TypeChar::from_char(type_char).ok_or_else(|| bad("unknown type character"))?;
    let rest: String = chars.collect();
    let digits_end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (size, unit) = rest.split_at(digits_end);
    let mut time_mult = 1u64;
    let unit = if unit.is_empty() {
        String::new()
    } else {
        let inner = unit
            .strip_prefix('[')
            .and_then(|u| u.strip_suffix(']'))
            .ok_or_else(|| bad("text after the size is not a [unit]"))?;
        let n_end = inner
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(inner.len());
        let (n, base) = inner.split_at(n_end);
        if !n.is_empty() {
            time_mult = n
                .parse::<u64>()
                .ok()
                .filter(|&m| m >= 1 && m <= i32::MAX as u64)
                .ok_or_else(|| bad("time-unit multiplier out of range"))?;
        }
        format!("[{base}]")
    };
    // Byte order: `=` is native; `|` ("not applicable") on a multi-byte number or a unicode
    // string also means native to numpy.
    let multi_byte = match tc {
        TypeChar::ByteStr | TypeChar::RawData | TypeChar::Object => false,
        TypeChar::UnicodeStr => true,
        _ => size != "1",
    };
    let order = match order {
        '=' => {
            if multi_byte {
                NATIVE
            } else {
                '|'
            }
        }
        '|' if multi_byte => NATIVE,
        c => c,
    };
    let canonical = format!("{order}{type_char}{size}{unit}");
    let ts: TypeStr = canonical.parse().map_err(|e| {
        Feature::DataType.unsupported(format!("dtype '{s}' is not understood ({e})"))
    })?;
    Ok(Plain { ts, time_mult })
}

/// From the first bytes of a `.npy` payload (at least [`PREAMBLE_LEN`] of them, or all there
/// are), the offset where the data starts, i.e. the length of magic + version + length field +
/// header text. Fails on a wrong magic, an unknown version or an oversized header.
pub(crate) fn header_extent(bytes: &[u8]) -> Result<(usize, (u8, u8))> {
    if bytes.len() < 8 || &bytes[..6] != MAGIC {
        return Err(Part::Header.malformed("not an .npy file: the \\x93NUMPY magic is missing"));
    }
    let version = (bytes[6], bytes[7]);
    let (len_size, len) = match version {
        (1, 0) => {
            let b = bytes.get(8..10).ok_or_else(|| {
                Part::Header.malformed("truncated .npy: header length is cut off")
            })?;
            (2, u16::from_le_bytes([b[0], b[1]]) as usize)
        }
        (2, 0) | (3, 0) => {
            let b = bytes.get(8..12).ok_or_else(|| {
                Part::Header.malformed("truncated .npy: header length is cut off")
            })?;
            let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            (4, usize::try_from(len).unwrap_or(usize::MAX))
        }
        (major, minor) => {
            return Err(Feature::Version.unsupported(format!(
                ".npy format version {major}.{minor} (known: 1.0, 2.0, 3.0)"
            )))
        }
    };
    if len > MAX_HEADER_LEN {
        return Err(Feature::Size.unsupported(format!(
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
        Part::Header.malformed(format!(
            "truncated .npy: header declares {} bytes of header text but only {} follow",
            data_offset - text_start,
            bytes.len().saturating_sub(text_start)
        ))
    })?;
    // Versions 1 and 2 are latin-1, version 3 is UTF-8.
    let text: Vec<char> = if version.0 == 3 {
        std::str::from_utf8(raw)
            .map_err(|_| Part::Header.malformed(".npy v3 header is not valid UTF-8"))?
            .chars()
            .collect()
    } else {
        raw.iter().map(|&b| char::from(b)).collect()
    };
    let lit = Parser::new(&text).parse_all()?;
    let Lit::Dict(entries) = lit else {
        return Err(Part::Header.malformed(".npy header is not a Python dict literal"));
    };
    let get = |key: &str| {
        entries
            .iter()
            .find(|(k, _)| matches!(k, Lit::Str(s) if s == key))
            .map(|(_, v)| v)
            .ok_or_else(|| Part::Header.malformed(format!(".npy header has no '{key}' key")))
    };
    let fortran_order = match get("fortran_order")? {
        Lit::Bool(b) => *b,
        _ => return Err(Part::Header.malformed(".npy header: 'fortran_order' is not True/False")),
    };
    let shape = match get("shape")? {
        Lit::Seq(items) => items
            .iter()
            .map(|v| match v {
                Lit::Int { neg: false, val } => Ok(*val),
                _ => Err(Part::Header.malformed(
                    ".npy header: 'shape' holds something other than a non-negative integer",
                )),
            })
            .collect::<Result<Vec<u64>>>()?,
        _ => return Err(Part::Header.malformed(".npy header: 'shape' is not a tuple")),
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

/// Converts a `descr` literal into a [`Dtype`].
fn descr_to_dtype(descr: &Lit) -> Result<Dtype> {
    match descr {
        Lit::Str(s) => Ok(Dtype::Plain(parse_type_str(s)?)),
        Lit::Seq(items) => {
            let mut fields = Vec::with_capacity(items.len());
            for item in items {
                let Lit::Seq(parts) = item else {
                    return Err(
                        Part::Header.malformed(".npy header: a record descr entry is not a tuple")
                    );
                };
                if !(2..=3).contains(&parts.len()) {
                    return Err(Part::Header
                        .malformed(".npy header: a record descr entry must have 2 or 3 items"));
                }
                let name = match &parts[0] {
                    Lit::Str(s) => s.clone(),
                    // `(title, name)`: numpy's titled fields.
                    Lit::Seq(tn) if tn.len() == 2 => match &tn[1] {
                        Lit::Str(s) => s.clone(),
                        _ => {
                            return Err(Part::Header
                                .malformed(".npy header: a record field name is not a string"))
                        }
                    },
                    _ => {
                        return Err(Part::Header
                            .malformed(".npy header: a record field name is not a string"))
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
                                _ => Err(Part::Header.malformed(
                                    ".npy header: a sub-array shape holds a non-integer",
                                )),
                            })
                            .collect::<Result<_>>()?,
                        _ => {
                            return Err(Part::Header
                                .malformed(".npy header: a sub-array shape is not a tuple"))
                        }
                    };
                    for &d in dims.iter().rev() {
                        dtype = Dtype::Array(d, Box::new(dtype));
                    }
                }
                fields.push(Field { name, dtype });
            }
            Ok(Dtype::Record(fields))
        }
        _ => Err(Part::Header
            .malformed(".npy header: 'descr' is neither a type string nor a list of fields")),
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
    Part::Header.malformed(format!(".npy header is not a valid Python literal: {msg}"))
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
        assert_eq!(h.dtype, Dtype::Plain(parse_type_str("<f8").unwrap()));
    }

    #[test]
    fn parses_record_header() {
        let h = parse_header(&npy(
            "{'descr': [('a', '<i4'), ('b', [('c', '>f4', (2, 3))]), (('t', 'd'), '|b1')], 'fortran_order': True, 'shape': (5L,)}",
        ))
        .unwrap();
        assert_eq!(h.shape, vec![5]);
        assert!(h.fortran_order);
        let Dtype::Record(fields) = &h.dtype else {
            panic!()
        };
        assert_eq!(fields.len(), 3);
        assert_eq!(fields[2].name, "d");
        assert_eq!(h.dtype.num_bytes(), Some(4 + 24 + 1));
    }

    #[test]
    fn byte_order_spellings_and_time_multipliers() {
        let p = |s: &str| parse_type_str(s).unwrap();
        assert_eq!(p("=f8"), p("<f8"));
        assert_eq!(p("|i4"), p("<i4"));
        assert_eq!(p("f4"), p("<f4"));
        assert_eq!(p("=u1").ts.to_string(), "|u1");
        assert_eq!(p("=b1").ts.to_string(), "|b1");
        assert_eq!(p("|U3"), p("<U3"));
        assert_eq!(p("=S5").ts.to_string(), "|S5");
        assert_eq!(p(">f8").ts.to_string(), ">f8");
        let t = p("<m8[10ms]");
        assert_eq!((t.ts.to_string().as_str(), t.time_mult), ("<m8[ms]", 10));
        let t = p(">M8[15m]");
        assert_eq!((t.ts.to_string().as_str(), t.time_mult), (">M8[m]", 15));
        assert_eq!(p("<M8[s]").time_mult, 1);
        for bad in [
            "<M8[0s]",
            "<M8[10]",
            "<M8[ms/2]",
            "<f8[s]",
            "<f",
            "<",
            "<x8",
            "<M8[99999999999s]",
        ] {
            assert!(parse_type_str(bad).is_err(), "{bad}");
        }
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
