//! Engine values as Python objects: typed attributes (numbers as one-dimensional numpy arrays
//! of their own type, text as `str`, text lists as `list[str]`), facts, string variables.

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tet_source::export::TextEntry;
use tet_source::{AttrValue, Fact};

/// One typed attribute value.
pub(crate) fn attr_to_py<'py>(py: Python<'py>, v: &AttrValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        AttrValue::Text(s) => s.into_pyobject(py)?.into_any(),
        AttrValue::TextList(l) => PyList::new(py, l)?.into_any(),
        AttrValue::I8(x) => PyArray1::from_slice(py, x).into_any(),
        AttrValue::U8(x) => PyArray1::from_slice(py, x).into_any(),
        AttrValue::I16(x) => PyArray1::from_slice(py, x).into_any(),
        AttrValue::U16(x) => PyArray1::from_slice(py, x).into_any(),
        AttrValue::I32(x) => PyArray1::from_slice(py, x).into_any(),
        AttrValue::U32(x) => PyArray1::from_slice(py, x).into_any(),
        AttrValue::I64(x) => PyArray1::from_slice(py, x).into_any(),
        AttrValue::U64(x) => PyArray1::from_slice(py, x).into_any(),
        AttrValue::F32(x) => PyArray1::from_slice(py, x).into_any(),
        AttrValue::F64(x) => PyArray1::from_slice(py, x).into_any(),
    })
}

/// Attributes as a list of `(name, value)` pairs, in source order.
pub(crate) fn attrs_to_py<'py>(
    py: Python<'py>,
    attrs: &[(String, AttrValue)],
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for (k, v) in attrs {
        list.append((k, attr_to_py(py, v)?))?;
    }
    Ok(list)
}

/// Facts as `(name, value)` pairs, as the footer records them.
pub(crate) fn facts_to_py<'py>(py: Python<'py>, facts: &[Fact]) -> PyResult<Bound<'py, PyList>> {
    attrs_to_py(py, &Fact::all_entries(facts))
}

/// The string variables of a model.
pub(crate) fn text_variables<'py>(
    py: Python<'py>,
    entries: &[TextEntry],
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for e in entries {
        let d = PyDict::new(py);
        match e {
            TextEntry::Variable(t) => {
                d.set_item("name", &t.name)?;
                d.set_item("shape", &t.shape)?;
                d.set_item("dims", &t.dims)?;
                d.set_item("values", &t.values)?;
                d.set_item("attrs", attrs_to_py(py, &t.attrs)?)?;
                let char_dim = t.char_axis.as_ref().map(|c| (c.dim.clone(), c.len));
                d.set_item("char_dim", char_dim)?;
                d.set_item("facts", facts_to_py(py, &t.facts)?)?;
                d.set_item("malformed", false)?;
            }
            TextEntry::Malformed { name } => {
                d.set_item("name", name)?;
                d.set_item("malformed", true)?;
            }
        }
        list.append(d)?;
    }
    Ok(list)
}
