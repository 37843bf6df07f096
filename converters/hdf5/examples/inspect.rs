//! Prints what the HDF5 importer makes of a file: variables (type, shape, dims, role, layout,
//! notes, facts, attributes), string variables, dimension labels, global attributes and skipped
//! items. `cargo run -p tet-hdf5 --example inspect -- FILE.h5 [--skip] [--follow]`

use tet_source::{OpenOptions, Source};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.iter().find(|a| !a.starts_with("--")) else {
        eprintln!("usage: inspect FILE.h5 [--skip] [--follow]");
        std::process::exit(2);
    };
    let opts = OpenOptions {
        skip_unsupported: args.iter().any(|a| a == "--skip"),
        follow_external: args.iter().any(|a| a == "--follow"),
        ..OpenOptions::default()
    };
    let src = match tet_hdf5::open_path(std::path::Path::new(path), &opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    for v in src.variables() {
        println!(
            "{} {} {:?} dims={:?} role={:?}",
            v.name, v.dtype, v.shape, v.dims, v.role
        );
        println!("    layout {:?}", v.layout);
        for n in &v.notes {
            println!("    note: {n}");
        }
        for (k, a) in tet_source::Fact::all_entries(&v.facts) {
            println!("    fact {k} = {a:?}");
        }
        for (k, a) in &v.attrs {
            println!("    @{k} = {a:?}");
        }
    }
    for t in src.text_variables() {
        println!(
            "{} text {:?} dims={:?} values={:?}",
            t.name, t.shape, t.dims, t.values
        );
    }
    for l in src.dim_labels() {
        println!("labels {} = {:?}", l.dim, l.labels);
    }
    for (k, a) in src.global_attrs() {
        println!("global @{k} = {a:?}");
    }
    for s in src.skipped() {
        println!("skipped {}: {}", s.name, s.reason);
    }
    println!("parallel_reads = {}", src.parallel_reads());
}
