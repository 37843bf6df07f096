//! Fuzzes the classic netCDF (CDF-1/2/5) importer: our header parser, then — for headers it
//! accepts — netCDF-C opening and reading the same bytes from memory. netCDF-4 (HDF5) inputs are
//! left out: libhdf5 itself crashes on some corrupt files (see fuzz/README.md).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tet_netcdf::classic::ClassicHeader;
use tet_netcdf::Container;
use tet_source::OpenOptions;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let _ = ClassicHeader::parse(data, data.len() as u64);
    if !Container::sniff(data).is_some_and(|c| c != Container::Hdf5) {
        return;
    }
    for (unpack, skip) in [(false, false), (true, true)] {
        let opts = OpenOptions {
            unpack,
            skip_unsupported: skip,
            ..OpenOptions::default()
        };
        if let Ok(src) = tet_netcdf::open_bytes(data.to_vec(), &opts) {
            common::read_all(&src);
        }
    }
});
