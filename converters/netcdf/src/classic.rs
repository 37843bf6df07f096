//! A structural reader of the classic netCDF header (CDF-1, CDF-2 "64-bit offset", CDF-5
//! "64-bit data"), used to validate a file *before* netCDF-C opens it.
//!
//! netCDF-C fills a short read with zeros, so a classic file cut short opens and reads as if its
//! missing tail were zeros. This module parses the header (the layout of the "netCDF Classic
//! and 64-bit Offset Format" and CDF-5 specifications: magic, `numrecs`, dimension list, global
//! attribute list, variable list with each variable's dimension ids, attributes, type, size and
//! `begin` offset, all big-endian), and [`ClassicHeader::check_extent`] then checks that every
//! variable's last byte lies inside the file. Every count is checked against the bytes left
//! before anything is allocated for it.

use std::fmt;

/// Why a header could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// The buffer ended inside the header; more bytes of the file are needed.
    NeedMore,
    /// The header is malformed (the message says how).
    Malformed(String),
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::NeedMore => {
                f.write_str("the classic header runs past the end of the file")
            }
            HeaderError::Malformed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for HeaderError {}

/// One variable as the header describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicVar {
    /// The name (bytes as stored).
    pub name: String,
    /// Dimension ids (indices into [`ClassicHeader::dims`]).
    pub dimids: Vec<usize>,
    /// The external type code (1 byte … 6 double; 7–11 CDF-5 only).
    pub nc_type: u32,
    /// File offset of the variable's data (of its first record for a record variable).
    pub begin: u64,
}

/// The parts of a classic header that locate data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicHeader {
    /// 1, 2 or 5.
    pub version: u8,
    /// Number of records; `None` for a file being streamed (`numrecs` all ones).
    pub numrecs: Option<u64>,
    /// Dimensions (name, length; length 0 = the record dimension).
    pub dims: Vec<(String, u64)>,
    pub vars: Vec<ClassicVar>,
    /// Size of the header in bytes.
    pub header_len: usize,
}

/// Bytes per value of a classic external type, `None` for an unknown code.
pub fn type_size(nc_type: u32, version: u8) -> Option<u64> {
    match nc_type {
        1 | 2 => Some(1),
        3 => Some(2),
        4 | 5 => Some(4),
        6 => Some(8),
        7 if version == 5 => Some(1),
        8 if version == 5 => Some(2),
        9 if version == 5 => Some(4),
        10 | 11 if version == 5 => Some(8),
        _ => None,
    }
}

const NC_DIMENSION: u32 = 0x0A;
const NC_VARIABLE: u32 = 0x0B;
const NC_ATTRIBUTE: u32 = 0x0C;

struct Reader<'a> {
    /// The bytes read so far (a prefix of the file).
    b: &'a [u8],
    /// Length of the whole file.
    total: u64,
    pos: usize,
    version: u8,
}

fn past_end() -> HeaderError {
    HeaderError::Malformed("the header runs past the end of the file".into())
}

impl Reader<'_> {
    fn take(&mut self, n: u64) -> Result<&[u8], HeaderError> {
        if n > self.left() {
            return Err(past_end());
        }
        let n = usize::try_from(n).map_err(|_| past_end())?;
        let end = self.pos.checked_add(n).ok_or_else(past_end)?;
        let s = self.b.get(self.pos..end).ok_or(HeaderError::NeedMore)?;
        self.pos = end;
        Ok(s)
    }

    /// Bytes of the file after the current position.
    fn left(&self) -> u64 {
        self.total.saturating_sub(self.pos as u64)
    }

    fn u32(&mut self) -> Result<u32, HeaderError> {
        let s = self.take(4)?;
        Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }

    fn u64(&mut self) -> Result<u64, HeaderError> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_be_bytes(a))
    }

    /// A NON_NEG count or length: 4 bytes, 8 in CDF-5.
    fn size(&mut self) -> Result<u64, HeaderError> {
        if self.version == 5 {
            self.u64()
        } else {
            self.u32().map(u64::from)
        }
    }

    /// Takes `n` bytes rounded up to a multiple of 4; returns the first `n`.
    fn take_padded(&mut self, n: u64) -> Result<&[u8], HeaderError> {
        let padded = n.checked_add(3).ok_or_else(past_end)? / 4 * 4;
        let s = self.take(padded)?;
        Ok(&s[..s.len().min(n as usize)])
    }

    fn name(&mut self, what: &str) -> Result<String, HeaderError> {
        let n = self.size()?;
        let bytes = self.take_padded(n)?.to_vec();
        String::from_utf8(bytes)
            .map_err(|_| HeaderError::Malformed(format!("a {what} name is not valid UTF-8")))
    }

    /// A list header: (tag, count), checking the tag.
    fn list(&mut self, tag: u32, what: &str, min_item: u64) -> Result<u64, HeaderError> {
        let t = self.u32()?;
        let n = self.size()?;
        if t == 0 {
            if n != 0 {
                return Err(HeaderError::Malformed(format!(
                    "absent {what} list with a count of {n}"
                )));
            }
            return Ok(0);
        }
        if t != tag {
            return Err(HeaderError::Malformed(format!(
                "expected the {what} list tag {tag:#x}, found {t:#x}"
            )));
        }
        if n.checked_mul(min_item).is_none_or(|b| b > self.left()) {
            return Err(HeaderError::Malformed(format!(
                "{n} {what} entries cannot fit in the {} bytes left in the file",
                self.left()
            )));
        }
        Ok(n)
    }

    fn att_list(&mut self) -> Result<(), HeaderError> {
        let n = self.list(NC_ATTRIBUTE, "attribute", 12)?;
        for _ in 0..n {
            self.name("attribute")?;
            let t = self.u32()?;
            let size = type_size(t, self.version).ok_or_else(|| {
                HeaderError::Malformed(format!("an attribute has an unknown type code {t}"))
            })?;
            let count = self.size()?;
            let bytes = count.checked_mul(size).ok_or_else(past_end)?;
            self.take_padded(bytes)?;
        }
        Ok(())
    }
}

impl ClassicHeader {
    /// Parses the header at the start of `bytes`, a prefix of a file of `file_len` bytes.
    /// [`HeaderError::NeedMore`] asks for a longer prefix.
    pub fn parse(bytes: &[u8], file_len: u64) -> Result<ClassicHeader, HeaderError> {
        let version = match bytes.get(..4) {
            Some([b'C', b'D', b'F', v @ (1 | 2 | 5)]) => *v,
            Some(_) => return Err(HeaderError::Malformed("not a classic netCDF file".into())),
            None if file_len < 4 => return Err(past_end()),
            None => return Err(HeaderError::NeedMore),
        };
        let mut r = Reader {
            b: bytes,
            total: file_len.max(bytes.len() as u64),
            pos: 4,
            version,
        };
        let numrecs = if version == 5 {
            let n = r.u64()?;
            (n != u64::MAX).then_some(n)
        } else {
            let n = r.u32()?;
            (n != u32::MAX).then_some(u64::from(n))
        };
        let ndims = r.list(NC_DIMENSION, "dimension", 8)?;
        let mut dims = Vec::new();
        for _ in 0..ndims {
            let name = r.name("dimension")?;
            let len = r.size()?;
            dims.push((name, len));
        }
        if dims.iter().filter(|d| d.1 == 0).count() > 1 {
            return Err(HeaderError::Malformed(
                "more than one unlimited (record) dimension".into(),
            ));
        }
        r.att_list()?;
        let nvars = r.list(NC_VARIABLE, "variable", 24)?;
        let mut vars = Vec::new();
        for _ in 0..nvars {
            let name = r.name("variable")?;
            let nd = r.size()?;
            let id_size = if version == 5 { 8 } else { 4 };
            if nd.checked_mul(id_size).is_none_or(|b| b > r.left()) {
                return Err(HeaderError::Malformed(format!(
                    "variable '{name}' claims {nd} dimensions"
                )));
            }
            let mut dimids = Vec::new();
            for _ in 0..nd {
                let id = if version == 5 {
                    r.u64()?
                } else {
                    u64::from(r.u32()?)
                };
                let id = usize::try_from(id)
                    .ok()
                    .filter(|&i| i < dims.len())
                    .ok_or_else(|| {
                        HeaderError::Malformed(format!(
                            "variable '{name}' refers to dimension id {id} of {}",
                            dims.len()
                        ))
                    })?;
                dimids.push(id);
            }
            r.att_list()?;
            let nc_type = r.u32()?;
            if type_size(nc_type, version).is_none() {
                return Err(HeaderError::Malformed(format!(
                    "variable '{name}' has an unknown type code {nc_type}"
                )));
            }
            let _vsize = r.size()?;
            let begin = if version == 1 {
                u64::from(r.u32()?)
            } else {
                r.u64()?
            };
            vars.push(ClassicVar {
                name,
                dimids,
                nc_type,
                begin,
            });
        }
        Ok(ClassicHeader {
            version,
            numrecs,
            dims,
            vars,
            header_len: r.pos,
        })
    }

    /// Whether variable `v` is a record variable (its first dimension is the record dimension).
    pub fn is_record_var(&self, v: &ClassicVar) -> bool {
        v.dimids.first().is_some_and(|&d| self.dims[d].1 == 0)
    }

    /// Checks that the data of every variable lies inside a file of `file_len` bytes.
    pub fn check_extent(&self, file_len: u64) -> Result<(), HeaderError> {
        let malformed = |m: String| Err(HeaderError::Malformed(m));
        // Bytes of one record (record variables) or of the whole variable (others).
        let mut sizes = Vec::with_capacity(self.vars.len());
        for v in &self.vars {
            let rec = self.is_record_var(v);
            let mut n: u128 = type_size(v.nc_type, self.version).unwrap_or(1).into();
            for (axis, &d) in v.dimids.iter().enumerate() {
                let len = self.dims[d].1;
                if len == 0 {
                    if axis != 0 {
                        return malformed(format!(
                            "variable '{}' uses the record dimension on axis {axis} (only the first may be)",
                            v.name
                        ));
                    }
                    continue;
                }
                n = n.saturating_mul(len.into());
            }
            sizes.push((rec, n));
        }
        // Record size as netCDF computes it: the sum of the record variables' per-record
        // sizes rounded up to 4 bytes, except that a single record variable is not padded.
        let pad4 = |n: u128| n.div_ceil(4).saturating_mul(4);
        let mut recsize: u128 = 0;
        let mut first: Option<u128> = None;
        for &(rec, n) in &sizes {
            if rec {
                first.get_or_insert(n);
                recsize = recsize.saturating_add(pad4(n));
            }
        }
        if let Some(f) = first {
            if recsize == pad4(f) {
                recsize = f;
            }
        }
        for (v, &(rec, n)) in self.vars.iter().zip(&sizes) {
            let end = if rec {
                match self.numrecs {
                    None | Some(0) => continue,
                    Some(r) => u128::from(v.begin)
                        .saturating_add(u128::from(r - 1).saturating_mul(recsize))
                        .saturating_add(n),
                }
            } else {
                u128::from(v.begin).saturating_add(n)
            };
            if n > 0 && end > u128::from(file_len) {
                let what = match self.numrecs {
                    Some(r) if rec => format!(" ({r} records)"),
                    _ => String::new(),
                };
                return malformed(format!(
                    "truncated: variable '{}'{what} needs {end} bytes, the file has {file_len}",
                    v.name
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CDF-1 header: dims (rec = unlimited, x = 3), no attributes, variables `r(rec, x)` and
    /// `s(x)` of type short, data right after the header.
    fn tiny(numrecs: u32) -> Vec<u8> {
        let mut h = b"CDF\x01".to_vec();
        let be = |h: &mut Vec<u8>, v: u32| h.extend_from_slice(&v.to_be_bytes());
        be(&mut h, numrecs);
        be(&mut h, NC_DIMENSION);
        be(&mut h, 2);
        for (name, len) in [("rec", 0u32), ("x", 3)] {
            be(&mut h, name.len() as u32);
            h.extend_from_slice(name.as_bytes());
            h.resize(h.len().div_ceil(4) * 4, 0);
            be(&mut h, len);
        }
        be(&mut h, 0); // no global attributes
        be(&mut h, 0);
        be(&mut h, NC_VARIABLE);
        be(&mut h, 2);
        // Header length: known in advance (computed below), begins patched after.
        let mut begins = Vec::new();
        for (name, dims) in [("r", vec![0u32, 1]), ("s", vec![1])] {
            be(&mut h, 1);
            h.extend_from_slice(name.as_bytes());
            h.resize(h.len().div_ceil(4) * 4, 0);
            be(&mut h, dims.len() as u32);
            for d in dims {
                be(&mut h, d);
            }
            be(&mut h, 0); // no attributes
            be(&mut h, 0);
            be(&mut h, 3); // short
            be(&mut h, 8); // vsize (padded)
            begins.push(h.len());
            be(&mut h, 0);
        }
        let header = h.len() as u32;
        // Non-record `s` first (6 bytes + 2 padding), then the records of `r` (6 bytes each,
        // a single record variable: not padded).
        let s_begin = header;
        let r_begin = header + 8;
        h[begins[0]..begins[0] + 4].copy_from_slice(&r_begin.to_be_bytes());
        h[begins[1]..begins[1] + 4].copy_from_slice(&s_begin.to_be_bytes());
        h.resize(r_begin as usize + 6 * numrecs as usize, 0);
        h
    }

    #[test]
    fn parses_and_checks_a_small_header() {
        let b = tiny(2);
        let h = ClassicHeader::parse(&b, b.len() as u64).unwrap();
        assert_eq!(h.version, 1);
        assert_eq!(h.numrecs, Some(2));
        assert_eq!(h.dims, vec![("rec".to_string(), 0), ("x".to_string(), 3)]);
        assert_eq!(h.vars.len(), 2);
        assert!(h.is_record_var(&h.vars[0]));
        assert!(!h.is_record_var(&h.vars[1]));
        assert_eq!(h.check_extent(b.len() as u64), Ok(()));
        let e = h.check_extent(b.len() as u64 - 1).unwrap_err();
        assert!(
            matches!(&e, HeaderError::Malformed(m) if m.contains("truncated: variable 'r' (2 records)")),
            "{e}"
        );
        // No records: nothing of `r` needs to be there.
        let b0 = tiny(0);
        let h0 = ClassicHeader::parse(&b0, b0.len() as u64).unwrap();
        assert_eq!(h0.check_extent(b0.len() as u64), Ok(()));
    }

    #[test]
    fn prefixes_ask_for_more_and_cut_files_are_malformed() {
        let b = tiny(1);
        let header = ClassicHeader::parse(&b, b.len() as u64).unwrap().header_len;
        for cut in 0..header {
            assert_eq!(
                ClassicHeader::parse(&b[..cut], b.len() as u64),
                Err(HeaderError::NeedMore),
                "prefix {cut}"
            );
            assert!(
                matches!(
                    ClassicHeader::parse(&b[..cut], cut as u64),
                    Err(HeaderError::Malformed(_))
                ),
                "file cut to {cut}"
            );
        }
    }

    #[test]
    fn bogus_counts_are_refused_without_allocating() {
        let mut b = tiny(1);
        // The dimension count (bytes 12..16) claims 2^31 entries.
        b[12..16].copy_from_slice(&0x8000_0000u32.to_be_bytes());
        let e = ClassicHeader::parse(&b, b.len() as u64).unwrap_err();
        assert!(matches!(e, HeaderError::Malformed(m) if m.contains("cannot fit")));
        // A dimension id out of range.
        let mut b = tiny(1);
        let h = ClassicHeader::parse(&b, b.len() as u64).unwrap();
        assert_eq!(h.vars[1].dimids, vec![1]);
        // `s` ends with: dimid, attribute tag, attribute count, type, vsize, begin.
        let last_dimid = h.header_len - 4 * 6;
        b[last_dimid..last_dimid + 4].copy_from_slice(&7u32.to_be_bytes());
        let e = ClassicHeader::parse(&b, b.len() as u64).unwrap_err();
        assert!(
            matches!(&e, HeaderError::Malformed(m) if m.contains("dimension id 7")),
            "{e:?}"
        );
    }

    #[test]
    fn the_corpus_headers_parse() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/corpus/public/netcdf"
        );
        for f in ["nc3_classic.nc", "nc3_64bit_offset_packed.nc"] {
            let b = std::fs::read(format!("{dir}/{f}")).unwrap();
            let h = ClassicHeader::parse(&b, b.len() as u64).unwrap();
            assert_eq!(h.check_extent(b.len() as u64), Ok(()), "{f}");
            assert!(h.check_extent(b.len() as u64 - 8).is_err(), "{f}");
        }
        let b = std::fs::read(format!("{dir}/nc3_classic.nc")).unwrap();
        let h = ClassicHeader::parse(&b, b.len() as u64).unwrap();
        assert_eq!(h.numrecs, Some(6));
        assert_eq!(h.dims.len(), 5);
        let names: Vec<&str> = h.vars.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "time",
                "lat",
                "lon",
                "station",
                "temp",
                "quality_flag",
                "obs_count",
                "station_name",
                "crs"
            ]
        );
    }
}
