//! Arrays of records (structured data types, see [`crate::structured`]): one variable per
//! numeric field, read by decoding whole records with zarrs (as raw bytes) and cutting the
//! field out of them; string fields become text variables, read once at open.

use std::sync::Arc;

use crate::guard::GuardedStore;
use crate::structured::{extract, FieldLayout, Fix, Leaf, LeafKind, RecordError};
use crate::{
    check_must_understand, decode_chunk_shape, dims_attrs_facts, product, ArrayMeta, Backing,
    Problem, ReadKind, Reader, Store, StructuredMeta, ZarrSource, MAX_TEXT_ELEMENTS,
};
use tet_source::{
    AttrValue, CharAxis, Fact, Feature, Lib, OpenOptions, Part, Request, Role, Skipped,
    SourceError, SourceLayout, TextVariable, Variable,
};
use zarrs::array::{Array, ArrayMetadata, ArraySubset};

/// Most bytes of records decoded at once to read one field (a region is read in slabs of its
/// first axis of at most this many bytes, or one row when a row is larger).
const SLAB_BYTES: u64 = 16 << 20;
/// Largest array (its records' bytes) whose string fields are read at open.
const MAX_TEXT_RECORD_BYTES: u64 = 64 << 20;

/// Why a field of a record has no form here (an unsupported item with this reason).
#[derive(Debug, thiserror::Error)]
enum FieldRefusal {
    /// Another variable already has the field's name.
    #[error("another dataset is already named '{0}'")]
    NameTaken(String),
    /// A field type with no form (why, from the record's analysis).
    #[error("{0}")]
    Type(String),
    /// Not a number (where a numeric field was expected).
    #[error("not a numeric field")]
    NotNumeric,
    /// The field's layout in the record.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The variable's shape holds more bytes than memory's integers.
    #[error("shape {0:?} has too many bytes")]
    TooManyBytes(Vec<u64>),
    /// A string field whose values would pass what is read at open.
    #[error(
        "string field of an array of {records} records of {record} bytes: over what is read at \
         open ({} MiB of records, {MAX_TEXT_ELEMENTS} strings)",
        MAX_TEXT_RECORD_BYTES >> 20
    )]
    TextTooLarge {
        /// Records of the array (`too many` when they overflow).
        records: String,
        /// Bytes of a record.
        record: u64,
    },
    /// A string field whose size overflows.
    #[error("string field too large")]
    StringTooLarge,
    /// A `U` value that is not Unicode.
    #[error(transparent)]
    NotText(#[from] tet_source::numpy::NotScalarValue),
}

impl FieldRefusal {
    /// What of the format it refuses.
    fn feature(&self) -> Feature {
        match self {
            FieldRefusal::TooManyBytes(_)
            | FieldRefusal::TextTooLarge { .. }
            | FieldRefusal::StringTooLarge => Feature::Size,
            FieldRefusal::NameTaken(_) => Feature::Structure,
            _ => Feature::DataType,
        }
    }
}

/// What every field of one array of records shares while its variables are added.
struct ArrayCtx<'a> {
    name: &'a str,
    index: usize,
    record: u64,
    shape: &'a [u64],
    chunk_shape: Option<Vec<u64>>,
    dims: Option<Vec<String>>,
    attrs: tet_source::Attrs,
    facts: Vec<Fact>,
    compressed: bool,
    filters: Vec<String>,
}

impl ZarrSource {
    /// Adds the variables of an array whose data type is a record (its metadata rewritten to
    /// raw bytes of the record's size). A field with no form here is skipped (with
    /// `skip_unsupported`) or fails the open as unsupported; the other fields stay.
    pub(crate) fn add_structured(
        &mut self,
        fs: &Arc<Backing>,
        rel: &str,
        name: &str,
        meta: ArrayMetadata,
        s: StructuredMeta,
        options: &OpenOptions,
    ) -> std::result::Result<(), Problem> {
        check_must_understand(&meta)?;
        let mut am = ArrayMeta::of(&meta);
        am.dt_json = s.dt_json;
        let store = Arc::new(GuardedStore::new(fs.clone(), None));
        // The metadata was rewritten here: whatever zarrs refuses in it is unsupported.
        let array = Array::new_with_metadata(store, &format!("/{rel}"), meta).map_err(|e| {
            Problem::Unsupported(
                Feature::DataType,
                format!("structured (record) data type: {e}"),
            )
        })?;
        let record = s.record.size;
        let shape = array.shape().to_vec();
        let malformed =
            |msg: String| Problem::Error(Part::Shape.malformed(format!("array '{name}': {msg}")));
        product(&shape)
            .and_then(|n| n.checked_mul(record))
            .ok_or_else(|| malformed(format!("shape {shape:?} has too many bytes")))?;
        let record_usize =
            usize::try_from(record).map_err(|_| malformed(format!("records of {record} bytes")))?;
        let (array, chunk_shape) = decode_chunk_shape(
            fs,
            array,
            am.grid_chunks,
            am.sharding.as_ref(),
            Some(record_usize),
            &shape,
        )?;
        let (dims, attrs, mut facts) = dims_attrs_facts(&array, shape.len(), am.fill_json);
        facts.push(Fact::private(
            "zarr",
            "zarr_data_type",
            AttrValue::Text(am.dt_json),
        ));
        let index = self.arrays.len();
        let ctx = ArrayCtx {
            name,
            index,
            record,
            shape: &shape,
            chunk_shape,
            dims,
            attrs,
            facts,
            compressed: am.compressed,
            filters: am.filters,
        };
        // Decoded once, when the array has string fields.
        let mut all_records: Option<Vec<u8>> = None;
        self.arrays.push(array);
        for leaf in &s.record.leaves {
            // An empty path: the array itself (v2 `|S<n>`, a record of one unnamed field).
            let full = leaf.name_under(name);
            let added = if self.name_taken(&full) {
                Err(FieldRefusal::NameTaken(full.clone()))
            } else {
                match &leaf.kind {
                    LeafKind::Unsupported(reason) => Err(FieldRefusal::Type(reason.clone())),
                    LeafKind::Numeric { .. } => self.add_field(&ctx, full.clone(), leaf),
                    LeafKind::Text { utf32, chars, swap } => {
                        let text = Text {
                            utf32: *utf32,
                            chars: *chars,
                            swap: *swap,
                        };
                        self.add_text_field(&ctx, full.clone(), leaf, text, &mut all_records)?
                    }
                }
            };
            if let Err(reason) = added {
                if !options.skip_unsupported {
                    return Err(Problem::Unsupported(
                        reason.feature(),
                        format!("field '{full}': {reason}"),
                    ));
                }
                self.skipped.push(Skipped {
                    name: full,
                    reason: reason.to_string(),
                });
            }
        }
        Ok(())
    }

    fn name_taken(&self, name: &str) -> bool {
        self.variables.iter().any(|v| v.name == name)
            || self.text_variables.iter().any(|t| t.name == name)
            || self.skipped.iter().any(|s| s.name == name)
    }

    /// Adds a numeric field as a variable (`Err`: why it has no form here).
    fn add_field(
        &mut self,
        ctx: &ArrayCtx,
        full: String,
        leaf: &Leaf,
    ) -> std::result::Result<(), FieldRefusal> {
        let LeafKind::Numeric {
            elem,
            swap,
            attrs,
            notes,
        } = &leaf.kind
        else {
            return Err(FieldRefusal::NotNumeric);
        };
        let layout = FieldLayout::new(ctx.record, leaf, *elem, *swap)?;
        let mut shape = ctx.shape.to_vec();
        shape.extend(leaf.place.inner.iter().map(|&(n, _)| n));
        product(&shape)
            .and_then(|n| n.checked_mul(elem.size() as u64))
            .ok_or_else(|| FieldRefusal::TooManyBytes(shape.clone()))?;
        let mut var_attrs = ctx.attrs.clone();
        var_attrs.extend(attrs.iter().cloned());
        let mut var_notes = field_notes(ctx.name, leaf);
        var_notes.extend(notes.iter().cloned());
        let var = Variable {
            name: full,
            dtype: *elem,
            dims: field_dims(ctx.dims.as_ref(), leaf),
            shape,
            attrs: var_attrs,
            layout: SourceLayout {
                chunk_shape: ctx.chunk_shape.clone().map(|mut c| {
                    c.extend(leaf.place.inner.iter().map(|&(n, _)| n.max(1)));
                    c
                }),
                compressed: ctx.compressed,
                filters: ctx.filters.clone(),
            },
            role: Role::Data,
            notes: var_notes,
            facts: ctx.facts.clone(),
        };
        let fi = self.fields.len();
        self.fields.push(layout);
        self.frames.push(None);
        self.variables.push(var);
        self.readers.push(Reader {
            array: ctx.index,
            kind: ReadKind::Field(fi),
        });
        Ok(())
    }

    /// Adds a fixed-length string field as a text variable, its values read now (the array's
    /// records are decoded once, into `all_records`, for all its string fields). `Ok(Err)`:
    /// the field has no form here; `Err`: the array's chunks do not decode.
    fn add_text_field(
        &mut self,
        ctx: &ArrayCtx,
        full: String,
        leaf: &Leaf,
        t: Text,
        all_records: &mut Option<Vec<u8>>,
    ) -> std::result::Result<std::result::Result<(), FieldRefusal>, Problem> {
        let esize = t.chars.checked_mul(if t.utf32 { 4 } else { 1 });
        let mut shape = ctx.shape.to_vec();
        shape.extend(leaf.place.inner.iter().map(|&(n, _)| n));
        let values_n = product(&shape);
        let record_bytes = product(ctx.shape).and_then(|n| n.checked_mul(ctx.record));
        if record_bytes.is_none_or(|b| b > MAX_TEXT_RECORD_BYTES)
            || values_n.is_none_or(|n| n > MAX_TEXT_ELEMENTS)
        {
            return Ok(Err(FieldRefusal::TextTooLarge {
                records: product(ctx.shape).map_or("too many".into(), |n| n.to_string()),
                record: ctx.record,
            }));
        }
        let Some(esize) = esize else {
            return Ok(Err(FieldRefusal::StringTooLarge));
        };
        let layout = match FieldLayout::with(ctx.record, leaf, esize, Fix::None) {
            Ok(l) => l,
            Err(e) => return Ok(Err(e.into())),
        };
        if all_records.is_none() {
            let array = &self.arrays[ctx.index];
            let n = record_bytes
                .and_then(|b| usize::try_from(b).ok())
                .unwrap_or(0);
            let mut buf = vec![0u8; n];
            if n > 0 {
                let subset = if ctx.shape.is_empty() {
                    ArraySubset::new_with_shape(Vec::new())
                } else {
                    array.subset_all()
                };
                self.decode_into(array, &subset, &mut buf, layout.record)?;
            }
            *all_records = Some(buf);
        }
        let records = all_records.as_deref().unwrap_or_default();
        let n_values = values_n.and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
        let mut bytes = vec![0u8; n_values.saturating_mul(layout.esize)];
        let zeros = vec![0u64; leaf.place.inner.len()];
        let counts: Vec<u64> = leaf.place.inner.iter().map(|&(n, _)| n).collect();
        if let Err(e) = extract(records, &layout, &zeros, &counts, &mut bytes) {
            return Err(Problem::Error(
                Part::Type.malformed(format!("array '{}': {e}", ctx.name)),
            ));
        }
        let values: std::result::Result<Vec<String>, FieldRefusal> = if layout.esize == 0 {
            Ok(vec![String::new(); n_values])
        } else {
            bytes
                .chunks_exact(layout.esize)
                .map(|b| {
                    if t.utf32 {
                        Ok(tet_source::numpy::decode_ucs4(b, t.swap)?)
                    } else {
                        Ok(tet_source::numpy::decode_bytes(b))
                    }
                })
                .collect()
        };
        let values = match values {
            Ok(v) => v,
            Err(e) => return Ok(Err(e)),
        };
        let char_axis = (!t.utf32).then(|| CharAxis {
            dim: format!("{}_strlen", full.rsplit('/').next().unwrap_or(&full)),
            len: t.chars,
        });
        self.text_variables.push(TextVariable {
            name: full,
            // A 0-d array's string is a text variable of shape [1], as for string arrays.
            shape: if shape.is_empty() { vec![1] } else { shape },
            dims: field_dims(ctx.dims.as_ref(), leaf),
            values,
            attrs: ctx.attrs.clone(),
            char_axis,
            facts: Vec::new(),
        });
        Ok(Ok(()))
    }

    /// Reads `start`/`count` of a field variable: the records of the region's array axes are
    /// decoded in slabs of the first axis, and the field's elements cut out of them.
    pub(crate) fn read_field(
        &self,
        array: &Array<Store>,
        f: &FieldLayout,
        start: &[u64],
        count: &[u64],
        out: &mut [u8],
    ) -> tet_source::Result<()> {
        let rank = start
            .len()
            .checked_sub(f.place.inner.len())
            .ok_or(Request::Rank {
                start: start.len(),
                count: count.len(),
                rank: f.place.inner.len(),
            })?;
        let (outer_start, inner_start) = start.split_at(rank);
        let (outer_count, inner_count) = count.split_at(rank);
        let too_large = || SourceError::from(Request::TooLarge);
        let per_record = product(inner_count)
            .and_then(|n| n.checked_mul(f.esize as u64))
            .ok_or_else(too_large)?;
        let fail = |e: RecordError| {
            Part::Type.malformed(format!(
                "array '{}': {e}",
                array.path().as_str().trim_start_matches('/')
            ))
        };
        if rank == 0 {
            let mut buf = vec![0u8; f.record];
            self.decode_into(
                array,
                &ArraySubset::new_with_shape(Vec::new()),
                &mut buf,
                f.record,
            )?;
            return extract(&buf, f, inner_start, inner_count, out).map_err(fail);
        }
        let row_records = product(&outer_count[1..]).ok_or_else(too_large)?;
        let row_bytes = row_records
            .checked_mul(f.record as u64)
            .ok_or_else(too_large)?;
        let rows_per_slab = (SLAB_BYTES / row_bytes.max(1)).max(1);
        let mut buf = Vec::new();
        let mut done = 0u64;
        let mut at = 0usize;
        while done < outer_count[0] {
            let rows = rows_per_slab.min(outer_count[0] - done);
            let mut s = outer_start.to_vec();
            s[0] = s[0].checked_add(done).ok_or_else(too_large)?;
            let mut c = outer_count.to_vec();
            c[0] = rows;
            let records = rows.checked_mul(row_records).ok_or_else(too_large)?;
            let in_len = records
                .checked_mul(f.record as u64)
                .and_then(|b| usize::try_from(b).ok())
                .ok_or_else(too_large)?;
            let out_len = records
                .checked_mul(per_record)
                .and_then(|b| usize::try_from(b).ok())
                .ok_or_else(too_large)?;
            buf.resize(in_len, 0);
            let subset = ArraySubset::new_with_start_shape(s, c)
                .map_err(|e| SourceError::library(Lib::Zarrs, "region", e))?;
            self.decode_into(array, &subset, &mut buf, f.record)?;
            let got = out.len() as u64;
            let dst = at
                .checked_add(out_len)
                .and_then(|end| out.get_mut(at..end))
                .ok_or(Request::BufferSize {
                    expected: (at as u64).saturating_add(out_len as u64),
                    got,
                })?;
            extract(&buf, f, inner_start, inner_count, dst).map_err(fail)?;
            at += out_len;
            done += rows;
        }
        Ok(())
    }
}

/// A string field's type.
struct Text {
    utf32: bool,
    chars: u64,
    swap: bool,
}

/// The notes every variable of a field gets: which field of which array, its sub-array axes,
/// and its naming.
fn field_notes(array: &str, leaf: &Leaf) -> Vec<String> {
    let mut notes = vec![format!(
        "field '{}' of the record (structured) array '{array}', split into one dataset per field",
        leaf.path.join("/")
    )];
    if !leaf.place.inner.is_empty() {
        let dims: Vec<String> = leaf
            .place
            .inner
            .iter()
            .map(|(n, _)| n.to_string())
            .collect();
        notes.push(format!(
            "sub-array field of shape ({},) stored as trailing axes",
            dims.join(", ")
        ));
    }
    notes.extend(leaf.notes.iter().cloned());
    notes
}

/// The array's dimension names, with one per trailing sub-array axis
/// (`<field path joined by _>_<axis>`).
fn field_dims(dims: Option<&Vec<String>>, leaf: &Leaf) -> Option<Vec<String>> {
    let mut d = dims?.clone();
    let stem = leaf.path.join("_");
    d.extend((0..leaf.place.inner.len()).map(|k| format!("{stem}_{k}")));
    Some(d)
}
