//! Test support shared by the tet-convert crates (a dev-dependency only; never in a build of
//! the product): where the shared corpus lives and what its sidecars say, whole-variable reads
//! through [`Source::read_region`], the engine's widening emulated (what a `.tet` dataset holds
//! for a source type), digests, and comparisons of typed attributes with sidecar JSON.
//!
//! One copy of each helper here, instead of one per test crate.

use std::path::{Path, PathBuf};

pub mod layout;
pub mod ranged;

use serde_json::Value;
use sha2::{Digest, Sha256};
use tet_source::{AttrValue, ElementType, Fact, Role, Source};

/// The workspace root (where `Cargo.toml` with `[workspace]` is).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shared public corpus (`../shared/corpus/public`, beside the workspace).
pub fn corpus_root() -> PathBuf {
    workspace_root().join("../shared/corpus/public")
}

/// The shared public corpus folder of one format (`../shared/corpus/public/<format>`).
pub fn corpus_dir(format: &str) -> PathBuf {
    corpus_root().join(format)
}

/// The corpus inputs of `format` whose extension is one of `extensions` (a store folder such as
/// `x.zarr` counts as a file), sorted; panics when there are none (a missing corpus must fail a
/// test, never make it pass vacuously).
pub fn corpus_files(format: &str, extensions: &[&str]) -> Vec<PathBuf> {
    let dir = corpus_dir(format);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus folder {}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| extensions.contains(&e))
        })
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no {extensions:?} files in {}",
        dir.display()
    );
    files
}

/// The sidecar `<input>.expect.json` of a corpus input.
pub fn sidecar(input: &Path) -> Value {
    let mut p = input.as_os_str().to_owned();
    p.push(".expect.json");
    let text = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", Path::new(&p).display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", Path::new(&p).display()))
}

/// A JSON array of non-negative integers (a sidecar's `shape`).
pub fn json_u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_u64().unwrap_or_else(|| panic!("not a u64: {x}")))
        .collect()
}

/// A JSON array of strings (text values, dimension names).
pub fn json_strs(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_str().unwrap_or_else(|| panic!("not a string: {x}")))
        .collect()
}

/// The index of the variable `name` of `src`; panics when there is none.
pub fn var_index(src: &dyn Source, name: &str) -> usize {
    src.variables()
        .iter()
        .position(|v| v.name == name)
        .unwrap_or_else(|| panic!("no variable {name}"))
}

/// A whole variable as little-endian C-order bytes. It is read twice, into buffers filled with
/// different bytes beforehand, and the two reads must agree (a read that leaves bytes unwritten
/// fails); what [`Source::contiguous_bytes`] lends, when it lends, must be the same bytes.
pub fn read_all(src: &dyn Source, var: usize) -> Vec<u8> {
    let v = &src.variables()[var];
    let len = v.byte_len().expect("variable size") as usize;
    let start = vec![0; v.shape.len()];
    let read = |fill: u8| {
        let mut out = vec![fill; len];
        src.read_region(var, &start, &v.shape, &mut out)
            .unwrap_or_else(|e| panic!("{}: {e}", v.name));
        out
    };
    let out = read(0x00);
    assert!(
        out == read(0xAA),
        "{}: a whole read left bytes unwritten",
        v.name
    );
    if let Some(lent) = src.contiguous_bytes(var) {
        assert!(
            lent == &out[..],
            "{}: contiguous_bytes differs from read_region",
            v.name
        );
    }
    out
}

/// A whole variable read in pieces along its first axis, `rows(k)` rows for the `k`th piece
/// (the last one clipped), checked against [`read_all`] (the two must agree byte for byte).
fn read_all_by_rows(src: &dyn Source, var: usize, rows: impl Fn(u64) -> u64) -> Vec<u8> {
    let whole = read_all(src, var);
    let v = &src.variables()[var];
    let Some(&total) = v.shape.first().filter(|&&r| r > 0) else {
        return whole;
    };
    let row = whole.len() / total as usize;
    let mut pieces = vec![0x55u8; whole.len()];
    let (mut first, mut k) = (0u64, 0u64);
    while first < total {
        let n = rows(k).clamp(1, total - first);
        let mut start = vec![0u64; v.shape.len()];
        start[0] = first;
        let mut count = v.shape.clone();
        count[0] = n;
        let at = first as usize * row;
        src.read_region(var, &start, &count, &mut pieces[at..at + n as usize * row])
            .unwrap_or_else(|e| panic!("{} rows {first}..{}: {e}", v.name, first + n));
        first += n;
        k += 1;
    }
    assert!(
        pieces == whole,
        "{}: reads of rows differ from a whole read",
        v.name
    );
    whole
}

/// Every variable read whole, `None` for those that fail to read or are larger than
/// `max_bytes` (a damaged header can make a dimension huge, and unallocated chunks legitimately
/// read as fill values however large): what robustness tests compare between a damaged and an
/// intact file.
pub fn read_each_whole(src: &dyn Source, max_bytes: u64) -> Vec<Option<Vec<u8>>> {
    src.variables()
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let n = v.byte_len().filter(|&n| n <= max_bytes)? as usize;
            let mut out = vec![0u8; n];
            let start = vec![0u64; v.shape.len()];
            src.read_region(i, &start, &v.shape, &mut out).ok()?;
            Some(out)
        })
        .collect()
}

/// A whole variable read slab by slab along its first axis, checked against one whole read
/// (the two must agree byte for byte).
pub fn read_all_in_slabs(src: &dyn Source, var: usize) -> Vec<u8> {
    read_all_by_rows(src, var, |_| 1)
}

/// A whole variable read in pieces of uneven, growing length (1, 3, 7, … rows along its first
/// axis, to exercise region offsets), checked against one whole read.
pub fn read_all_in_pieces(src: &dyn Source, var: usize) -> Vec<u8> {
    read_all_by_rows(src, var, |k| (2u64 << k.min(62)) - 1)
}

/// Calls `f` with the C-order element offset (into an array of `shape`) of each element of the
/// block `start..start+count`, in C order.
fn for_each_offset(shape: &[u64], start: &[u64], count: &[u64], mut f: impl FnMut(usize)) {
    let n: u64 = count.iter().product();
    let rank = shape.len();
    let mut idx = vec![0u64; rank];
    for _ in 0..n {
        let mut off = 0u64;
        for d in 0..rank {
            off = off * shape[d] + start[d] + idx[d];
        }
        f(off as usize);
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < count[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// The C-order sub-block `start..start+count` of a full buffer of `shape` (elements of `elem`
/// bytes): what a region read must give.
pub fn sub_block(full: &[u8], shape: &[u64], elem: usize, start: &[u64], count: &[u64]) -> Vec<u8> {
    let n: u64 = count.iter().product();
    let mut out = Vec::with_capacity(n as usize * elem);
    for_each_offset(shape, start, count, |off| {
        out.extend_from_slice(&full[off * elem..][..elem]);
    });
    out
}

/// Overwrites the C-order block `start..start+count` of a full buffer of `shape` with `block`
/// (the inverse of [`sub_block`]).
pub fn put_block(
    full: &mut [u8],
    shape: &[u64],
    elem: usize,
    start: &[u64],
    count: &[u64],
    block: &[u8],
) {
    let mut i = 0;
    for_each_offset(shape, start, count, |off| {
        full[off * elem..][..elem].copy_from_slice(&block[i * elem..][..elem]);
        i += 1;
    });
}

/// Part `k` (0 real, 1 imaginary) of interleaved complex bytes of the complex type `complex`.
pub fn complex_part(bytes: &[u8], complex: ElementType, k: usize) -> Vec<u8> {
    let half = complex
        .complex_component()
        .unwrap_or_else(|| panic!("{complex} is not complex"))
        .size();
    bytes
        .chunks_exact(2 * half)
        .flat_map(|e| e[k * half..][..half].to_vec())
        .collect()
}

/// The bytes a `.tet` dataset holds for source bytes of `dtype` (the engine's widening: i8 →
/// i16, bool → u8, bf16 → f32), with the stored type's name.
pub fn widen(dtype: ElementType, bytes: &[u8]) -> (Vec<u8>, &'static str) {
    match dtype {
        ElementType::I8 => (
            bytes
                .iter()
                .flat_map(|&b| i16::from(b as i8).to_le_bytes())
                .collect(),
            "i16",
        ),
        ElementType::BF16 => (
            bytes
                .chunks_exact(2)
                .flat_map(|c| (u32::from(u16::from_le_bytes([c[0], c[1]])) << 16).to_le_bytes())
                .collect(),
            "f32",
        ),
        ElementType::Bool => (bytes.to_vec(), "u8"),
        d => (bytes.to_vec(), d.name()),
    }
}

/// Little-endian values of a real numeric type (not f16, bf16 or complex) as `f64`: exact for
/// floats and for integers up to 2^53, what sidecars list as `first` values or statistics.
pub fn as_f64s(dtype: ElementType, bytes: &[u8]) -> Vec<f64> {
    fn each<const N: usize>(bytes: &[u8], f: impl Fn([u8; N]) -> f64) -> Vec<f64> {
        bytes
            .chunks_exact(N)
            .map(|c| f(c.try_into().expect("N bytes")))
            .collect()
    }
    match dtype {
        ElementType::Bool | ElementType::U8 => bytes.iter().map(|&b| f64::from(b)).collect(),
        ElementType::I8 => bytes.iter().map(|&b| f64::from(b as i8)).collect(),
        ElementType::I16 => each(bytes, |b| f64::from(i16::from_le_bytes(b))),
        ElementType::U16 => each(bytes, |b| f64::from(u16::from_le_bytes(b))),
        ElementType::I32 => each(bytes, |b| f64::from(i32::from_le_bytes(b))),
        ElementType::U32 => each(bytes, |b| f64::from(u32::from_le_bytes(b))),
        ElementType::I64 => each(bytes, |b| i64::from_le_bytes(b) as f64),
        ElementType::U64 => each(bytes, |b| u64::from_le_bytes(b) as f64),
        ElementType::F32 => each(bytes, |b| f64::from(f32::from_le_bytes(b))),
        ElementType::F64 => each(bytes, f64::from_le_bytes),
        t => panic!("as_f64s: {t} values"),
    }
}

/// Lower-case hex SHA-256 (what the sidecars record).
pub fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A sidecar's `role`: `"data"` or `"coordinate"` (anything else fails).
pub fn json_role(v: &Value) -> Role {
    match v.as_str() {
        Some("data") => Role::Data,
        Some("coordinate") => Role::Coordinate,
        _ => panic!("unexpected role {v}"),
    }
}

/// Checks variable `var` of `src` against `a`, one of a sidecar's `arrays`: its name, shape,
/// dims, role and source type; then its values, read whole by `read`, as the engine stores
/// them ([`widen`]) against the sidecar's stored type, byte count and SHA-256. Returns the bytes
/// `read` gave (not widened). `ctx` names the input in failures.
pub fn check_sidecar_array(
    ctx: &str,
    src: &dyn Source,
    var: usize,
    a: &Value,
    read: fn(&dyn Source, usize) -> Vec<u8>,
) -> Vec<u8> {
    let v = &src.variables()[var];
    let ctx = format!("{ctx}/{}", v.name);
    assert_eq!(Some(v.name.as_str()), a["name"].as_str(), "{ctx}: name");
    assert_eq!(v.shape, json_u64s(&a["shape"]), "{ctx}: shape");
    let dims = (!a["dims"].is_null()).then(|| json_strs(&a["dims"]));
    assert_eq!(
        v.dims
            .as_ref()
            .map(|d| d.iter().map(String::as_str).collect::<Vec<_>>()),
        dims,
        "{ctx}: dims"
    );
    assert_eq!(v.role, json_role(&a["role"]), "{ctx}: role");
    assert_eq!(
        Some(v.dtype.name()),
        a["source_tag"].as_str(),
        "{ctx}: dtype"
    );
    let raw = read(src, var);
    let (stored, stored_type) = widen(v.dtype, &raw);
    assert_eq!(
        Some(stored_type),
        a["stored_dtype"].as_str(),
        "{ctx}: stored dtype"
    );
    assert_eq!(
        Some(stored.len() as u64),
        a["nbytes_stored"].as_u64(),
        "{ctx}: stored bytes"
    );
    assert_eq!(
        Some(sha_hex(&stored).as_str()),
        a["sha256"].as_str(),
        "{ctx}: sha256"
    );
    raw
}

/// The attribute `key`.
pub fn find<'a>(attrs: &'a [(String, AttrValue)], key: &str) -> Option<&'a AttrValue> {
    attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// The value of the format-private fact `key` (a [`Fact::Private`]); it must be `format`'s.
pub fn private_fact<'a>(facts: &'a [Fact], format: &str, key: &str) -> Option<&'a AttrValue> {
    facts.iter().find_map(|f| match f {
        Fact::Private {
            format: owner,
            key: k,
            value,
        } if k == key => {
            assert_eq!(owner, format, "fact {key}");
            Some(value)
        }
        _ => None,
    })
}

/// The footer entry `key` that `facts` record (see [`Fact::entries`]).
pub fn fact_entry(facts: &[Fact], key: &str) -> Option<AttrValue> {
    Fact::all_entries(facts)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

/// A JSON object flattened to dotted keys (arrays and scalars are leaves).
pub fn flatten_json(prefix: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten_json(&key, x, out);
            }
        }
        leaf => out.push((prefix.to_string(), leaf.clone())),
    }
}

fn num_eq(json: &Value, x: f64) -> bool {
    match json {
        Value::Number(n) => n.as_f64().is_some_and(|j| j == x),
        Value::Bool(b) => f64::from(u8::from(*b)) == x,
        Value::String(s) => tet_source::json_text::parse_non_finite(s)
            .is_some_and(|j| j == x || (j.is_nan() && x.is_nan())),
        _ => false,
    }
}

fn int_eq(json: &Value, x: i128) -> bool {
    match json {
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or(n.as_u64().map(i128::from))
            .is_some_and(|j| j == x),
        Value::Bool(b) => i128::from(*b) == x,
        _ => false,
    }
}

/// A typed attribute against a sidecar JSON value: numbers by value (NaN and the infinities as
/// the strings `"NaN"`, `"Infinity"`, `"-Infinity"`), text exactly, a one-element vector against
/// a scalar, longer vectors against arrays.
pub fn attr_matches(attr: &AttrValue, json: &Value) -> bool {
    fn each<T: Copy>(v: &[T], json: &Value, eq: impl Fn(&Value, T) -> bool) -> bool {
        match json {
            Value::Array(a) => a.len() == v.len() && a.iter().zip(v).all(|(j, &x)| eq(j, x)),
            scalar => v.len() == 1 && eq(scalar, v[0]),
        }
    }
    match attr {
        AttrValue::Text(s) => json.as_str() == Some(s.as_str()),
        AttrValue::TextList(l) => json.as_array().is_some_and(|a| {
            a.len() == l.len() && a.iter().zip(l).all(|(j, s)| j.as_str() == Some(s))
        }),
        AttrValue::I8(v) => each(v, json, |j, x| int_eq(j, x.into())),
        AttrValue::U8(v) => each(v, json, |j, x| int_eq(j, x.into())),
        AttrValue::I16(v) => each(v, json, |j, x| int_eq(j, x.into())),
        AttrValue::U16(v) => each(v, json, |j, x| int_eq(j, x.into())),
        AttrValue::I32(v) => each(v, json, |j, x| int_eq(j, x.into())),
        AttrValue::U32(v) => each(v, json, |j, x| int_eq(j, x.into())),
        AttrValue::I64(v) => each(v, json, |j, x| int_eq(j, x.into())),
        AttrValue::U64(v) => each(v, json, |j, x| int_eq(j, x.into())),
        AttrValue::F32(v) => each(v, json, |j, x| num_eq(j, x.into())),
        AttrValue::F64(v) => each(v, json, num_eq),
    }
}

/// [`attr_matches`], and a text attribute against a JSON value that is not a string (an
/// object, a mixed list): the text must parse to that value (as Zarr keeps JSON attributes
/// with no typed form).
pub fn attr_matches_or_json_text(attr: &AttrValue, json: &Value) -> bool {
    match (attr, json) {
        (AttrValue::Text(s), j) if !j.is_string() => {
            serde_json::from_str::<Value>(s).is_ok_and(|v| &v == j)
        }
        _ => attr_matches(attr, json),
    }
}

/// `attrs` hold exactly the (flattened) sidecar object `expected`, value for value.
pub fn assert_attrs_equal(what: &str, attrs: &[(String, AttrValue)], expected: &Value) {
    let mut flat = Vec::new();
    flatten_json("", expected, &mut flat);
    let mut ours: Vec<&str> = attrs.iter().map(|(k, _)| k.as_str()).collect();
    let mut theirs: Vec<&str> = flat.iter().map(|(k, _)| k.as_str()).collect();
    ours.sort_unstable();
    theirs.sort_unstable();
    assert_eq!(ours, theirs, "{what}: attribute keys");
    for (k, j) in &flat {
        let a = find(attrs, k).expect("key listed above");
        assert!(attr_matches(a, j), "{what}: {k} = {a:?}, sidecar {j}");
    }
}

/// The first element whose bytes differ, for a readable failure (floats of 4 and 8 bytes are
/// shown as numbers too); `None` when `got == want`.
pub fn first_difference(got: &[u8], want: &[u8], elem: usize) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} bytes, expected {}", got.len(), want.len()));
    }
    got.chunks_exact(elem)
        .zip(want.chunks_exact(elem))
        .position(|(g, w)| g != w)
        .map(|i| {
            let (g, w) = (&got[i * elem..][..elem], &want[i * elem..][..elem]);
            let num = |b: &[u8]| match elem {
                8 => format!(
                    " ({:e})",
                    f64::from_le_bytes(b.try_into().expect("8 bytes"))
                ),
                4 => format!(
                    " ({:e})",
                    f32::from_le_bytes(b.try_into().expect("4 bytes"))
                ),
                _ => String::new(),
            };
            format!("element {i}: got {g:?}{}, expected {w:?}{}", num(g), num(w))
        })
}

/// The little-endian bytes of integer-coded expected values as generators write them: `bits`
/// (each value's bit pattern as an unsigned integer: floats, NaN payloads included) or
/// `values` (integers), each cut to `size` bytes.
pub fn expected_le_bytes(e: &Value, size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(bits) = e.get("bits") {
        for b in bits.as_array().expect("bits is a list") {
            out.extend_from_slice(&b.as_u64().expect("a bit pattern").to_le_bytes()[..size]);
        }
    } else {
        for v in e["values"].as_array().expect("values is a list") {
            let x = v
                .as_i64()
                .map(i128::from)
                .unwrap_or_else(|| i128::from(v.as_u64().expect("an integer")));
            out.extend_from_slice(&x.to_le_bytes()[..size]);
        }
    }
    out
}

/// A small deterministic generator (xorshift64, shifts 13, 7, 17) for test data and for where
/// to damage a file. The state must not be 0.
#[derive(Debug, Clone)]
pub struct XorShift(pub u64);

impl XorShift {
    /// The next state.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// `n` bytes, one a step (bits 24..32 of each state).
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next_u64() >> 24) as u8).collect()
    }

    /// `bytes` (not empty) with 1 to 4 bytes set to random values, each at a random position
    /// that is, half the time, one of the first `aim` bytes (to hit headers more often than
    /// data); with the changes made (position, new value).
    pub fn damage(&mut self, bytes: &[u8], aim: usize) -> (Vec<u8>, Vec<(usize, u8)>) {
        let mut b = bytes.to_vec();
        let flips = 1 + self.next_u64() % 4;
        let mut changes = Vec::new();
        for _ in 0..flips {
            let pos = (self.next_u64() % b.len() as u64) as usize;
            let pos = if self.next_u64().is_multiple_of(2) {
                pos % aim.min(b.len())
            } else {
                pos
            };
            let value = self.next_u64() as u8;
            b[pos] = value;
            changes.push((pos, value));
        }
        (b, changes)
    }
}

/// Copies a file, or a folder recursively, as writable copies (the corpus may be read-only).
pub fn copy_tree(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
        for e in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
            let e = e.expect("folder entry");
            copy_tree(&e.path(), &to.join(e.file_name()));
        }
    } else {
        let bytes = std::fs::read(from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        std::fs::write(to, bytes).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    }
}

/// Every file below `dir` (at any depth), sorted.
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.expect("folder entry").path();
        if p.is_dir() {
            out.extend(files_below(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tet_source::Variable;

    /// A 4×3 u8 variable in memory whose reads can be broken on purpose.
    struct Mem {
        vars: Vec<Variable>,
        data: Vec<u8>,
        /// Leave the last byte of every read unwritten.
        skip_last: bool,
        /// Lend these bytes as `contiguous_bytes`.
        lend: Option<Vec<u8>>,
    }

    impl Mem {
        fn new() -> Self {
            let mut v = Variable::new("v", ElementType::U8, vec![4, 3]);
            v.dims = Some(vec!["y".into(), "x".into()]);
            Mem {
                vars: vec![v],
                data: (0..12).collect(),
                skip_last: false,
                lend: None,
            }
        }
    }

    impl Source for Mem {
        fn variables(&self) -> &[Variable] {
            &self.vars
        }

        fn read_region(
            &self,
            _var: usize,
            start: &[u64],
            count: &[u64],
            out: &mut [u8],
        ) -> tet_source::Result<()> {
            let block = sub_block(&self.data, &[4, 3], 1, start, count);
            let n = block.len() - usize::from(self.skip_last && !block.is_empty());
            out[..n].copy_from_slice(&block[..n]);
            Ok(())
        }

        fn contiguous_bytes(&self, _var: usize) -> Option<&[u8]> {
            self.lend.as_deref()
        }
    }

    fn panics(f: impl FnOnce() + std::panic::UnwindSafe) -> bool {
        std::panic::catch_unwind(f).is_err()
    }

    #[test]
    fn whole_reads_catch_faulty_sources() {
        let good = Mem::new();
        let want: Vec<u8> = (0..12).collect();
        assert_eq!(read_all(&good, 0), want);
        assert_eq!(read_all_in_slabs(&good, 0), want);
        assert_eq!(read_all_in_pieces(&good, 0), want);
        let a = serde_json::json!({"name": "v", "shape": [4, 3], "dims": ["y", "x"],
            "role": "data", "source_tag": "u8", "stored_dtype": "u8", "nbytes_stored": 12,
            "sha256": sha_hex(&want)});
        assert_eq!(check_sidecar_array("mem", &good, 0, &a, read_all), want);
        for (key, bad) in [
            ("sha256", serde_json::json!(sha_hex(b"other"))),
            ("dims", Value::Null),
            ("role", serde_json::json!("coordinate")),
            ("stored_dtype", serde_json::json!("i16")),
            ("nbytes_stored", serde_json::json!(24)),
            ("shape", serde_json::json!([3, 4])),
        ] {
            let mut a = a.clone();
            a[key] = bad;
            assert!(
                panics(|| {
                    check_sidecar_array("mem", &Mem::new(), 0, &a, read_all);
                }),
                "{key}"
            );
        }
        assert!(panics(|| {
            read_all(
                &Mem {
                    skip_last: true,
                    ..Mem::new()
                },
                0,
            );
        }));
        assert!(panics(|| {
            read_all(
                &Mem {
                    lend: Some(vec![0; 12]),
                    ..Mem::new()
                },
                0,
            );
        }));
    }

    #[test]
    fn sub_block_and_widen() {
        let full: Vec<u8> = (0..12).collect();
        assert_eq!(
            sub_block(&full, &[3, 4], 1, &[1, 1], &[2, 2]),
            [5, 6, 9, 10]
        );
        assert_eq!(widen(ElementType::I8, &[0xff]).0, [0xff, 0xff]);
        assert_eq!(
            widen(ElementType::BF16, &[0x80, 0x3f]).0,
            1f32.to_le_bytes()
        );
        assert_eq!(
            first_difference(&[1, 2], &[1, 3], 1).as_deref(),
            Some("element 1: got [2], expected [3]")
        );
        let mut full = vec![0u8; 12];
        put_block(&mut full, &[3, 4], 1, &[1, 1], &[2, 2], &[5, 6, 9, 10]);
        assert_eq!(full, [0, 0, 0, 0, 0, 5, 6, 0, 0, 9, 10, 0]);
        let c64: Vec<u8> = [1f32, 2., 3., 4.]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(
            complex_part(&c64, ElementType::C64, 1),
            [2f32.to_le_bytes(), 4f32.to_le_bytes()].concat()
        );
        assert_eq!(as_f64s(ElementType::I16, &(-3i16).to_le_bytes()), [-3.0]);
        assert_eq!(as_f64s(ElementType::F32, &0.5f32.to_le_bytes()), [0.5]);
        let mut r = XorShift(1);
        assert_eq!(r.next_u64(), 0x4082_2041);
        assert_eq!(r.next_u64(), 0x1000_4106_0c01_1441);
        assert_eq!(XorShift(1).bytes(2), [0x40, 0x0c]);
    }

    #[test]
    fn attrs_against_json() {
        let j: Value = serde_json::json!({"a": 1, "b": {"c": ["x", "y"]}, "n": "NaN"});
        let attrs = vec![
            ("a".into(), AttrValue::I32(vec![1])),
            (
                "b.c".into(),
                AttrValue::TextList(vec!["x".into(), "y".into()]),
            ),
            ("n".into(), AttrValue::F64(vec![f64::NAN])),
        ];
        assert_attrs_equal("t", &attrs, &j);
        assert!(!attr_matches(
            &AttrValue::I32(vec![2]),
            &serde_json::json!(1)
        ));
        let nested = AttrValue::Text(r#"{"k":1}"#.into());
        assert!(attr_matches_or_json_text(
            &nested,
            &serde_json::json!({"k": 1})
        ));
        assert!(!attr_matches_or_json_text(
            &nested,
            &serde_json::json!({"k": 2})
        ));
        assert!(!attr_matches(&nested, &serde_json::json!({"k": 1})));
        assert!(!attr_matches_or_json_text(
            &AttrValue::Text("1".into()),
            &serde_json::json!("2")
        ));
    }
}
