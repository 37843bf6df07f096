//! A netCDF export that netCDF-C refuses fails with [`ExportError::Library`] naming netCDF-C,
//! netCDF-C's own error kept as the `source()`: classified by variant and library, not by text.

use std::error::Error as _;

use tet_netcdf::export::NcExporter;
use tet_source::export::{
    Chunk, ChunkSource, Compression, ExportError, Exporter, Model, Output, Result,
};
use tet_source::{AttrValue, Lib};

/// A model without arrays: no chunk is ever asked for.
struct NoChunks;

impl ChunkSource for NoChunks {
    fn chunk(&mut self, array: usize, _: &[u64]) -> Result<Chunk<'_>> {
        Err(ExportError::Invalid(format!("no array {array}")))
    }
    fn zstd_frame(&mut self, _: usize, _: &[u64]) -> Result<Option<&[u8]>> {
        Ok(None)
    }
}

#[test]
fn a_name_netcdf_c_refuses_keeps_its_error_as_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let staging = dir.path().join("out.nc");
    // A control character: netCDF-C's name check refuses it (NC_EBADNAME).
    let model = Model {
        global_attrs: vec![("a\u{1}b".into(), AttrValue::Text("x".into()))],
        ..Model::default()
    };
    let out = Output {
        path: &staging,
        staging: &staging,
    };
    let err = NcExporter
        .write(&model, &mut NoChunks, out, Compression::None)
        .expect_err("netCDF-C refuses the attribute name");
    let ExportError::Library { lib, context, .. } = &err else {
        panic!("not a library error: {err:?}");
    };
    assert_eq!(*lib, Lib::NetCdf);
    assert!(context.contains("a\u{1}b"), "{context}");
    let source = err.source().expect("netCDF-C's error is kept");
    // One line: the context, then netCDF-C's own text.
    assert_eq!(err.to_string(), format!("{context}: {source}"));
    assert!(!source.to_string().is_empty());
    assert!(!err.to_string().contains('\n'), "{err}");
}
