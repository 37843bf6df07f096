//! Zarr variable-length `bytes` arrays (zarr-python 3's `variable_length_bytes`, the
//! `vlen-bytes` codec; zarrs' `bytes` / `binary`) in tensor form, as the NPY importer treats
//! `S` data: when every value is UTF-8 the array is a text variable (as `string` arrays are),
//! else a CF contiguous ragged array of `u8` (values + `<name>_count`, see
//! `tet_source::ragged`), so no byte is dropped. The whole array is read at open. A v2 object
//! array (`|O`) with the `vlen-bytes` filter (zarr-python 2's bytes objects) is the same type:
//! zarrs takes every `|O` for `string`, so its `dtype` is rewritten to `|VX`, zarrs' v2 name of
//! `bytes` ([`v2_object_bytes`]).

use std::panic::{catch_unwind, AssertUnwindSafe};

use tet_source::ragged::{InMemory, Ragged};
use tet_source::{AttrValue, ElementType, Fact, Part, Result, Variable};
use zarrs::array::{Array, CodecOptions};

use crate::Store;

/// Rewrites the v2 `.zarray` `value` of an object array (`|O`) whose filters hold
/// `vlen-bytes` to zarrs' v2 name of the `bytes` type, `|VX`.
pub(crate) fn v2_object_bytes(value: &mut serde_json::Value) {
    let Some(obj) = value.as_object_mut() else {
        return;
    };
    let vlen_bytes = obj
        .get("filters")
        .and_then(serde_json::Value::as_array)
        .is_some_and(|f| {
            f.iter()
                .any(|c| c.get("id").and_then(serde_json::Value::as_str) == Some("vlen-bytes"))
        });
    if vlen_bytes && obj.get("dtype").and_then(serde_json::Value::as_str) == Some("|O") {
        obj.insert("dtype".into(), "|VX".into());
    }
}

/// What a `bytes` array became.
pub(crate) enum BytesForm {
    /// Every value decodes as UTF-8: the values as text, in C order.
    Text(Vec<String>),
    /// At least one value is not UTF-8: the ragged values and count variables with their data.
    Ragged(Box<((Variable, InMemory), (Variable, InMemory))>),
}

/// Every value of `array` (C order) as zarrs decodes it.
fn read_values(array: &Array<Store>, name: &str, opts: &CodecOptions) -> Result<Vec<Vec<u8>>> {
    let subset = array.subset_all();
    let what = format!("array '{name}': cannot read its bytes values");
    let got = catch_unwind(AssertUnwindSafe(|| {
        array
            .retrieve_array_subset_opt::<Vec<Vec<u8>>>(&subset, opts)
            .map_err(|e| Part::Chunk.malformed_by(what.clone(), e))
    }));
    got.unwrap_or_else(|_| {
        Err(Part::Chunk.malformed(format!(
            "{what}: zarrs failed decoding the values (corrupt chunk?)"
        )))
    })
}

/// Reads the `bytes` array `array` (`count` elements) whose variable as the source has it is
/// `base` (its dtype ignored) and maps it to text or a ragged array of `u8`.
pub(crate) fn read(
    array: &Array<Store>,
    opts: &CodecOptions,
    base: Variable,
    count: u64,
    dt_json: &str,
) -> Result<BytesForm> {
    let values = read_values(array, &base.name, opts)?;
    if values.len() as u64 != count {
        return Err(Part::Values.malformed(format!(
            "array '{}': {} values read, {count} expected",
            base.name,
            values.len()
        )));
    }
    if values.iter().all(|v| std::str::from_utf8(v).is_ok()) {
        let text = values
            .into_iter()
            .map(|v| String::from_utf8(v).unwrap_or_default())
            .collect();
        return Ok(BytesForm::Text(text));
    }
    let mut gathered = Ragged::new(ElementType::U8);
    for v in &values {
        gathered.push(v)?;
    }
    let mut base = base;
    base.facts.push(Fact::private(
        "zarr",
        "zarr_data_type",
        AttrValue::Text(dt_json.to_string()),
    ));
    let vars = gathered.into_variables(base, "bytes")?;
    Ok(BytesForm::Ragged(Box::new(vars)))
}
