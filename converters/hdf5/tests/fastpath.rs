//! The direct chunk path against the library: datasets written here with hdf5-metno (chunked,
//! deflate + shuffle + fletcher32, partial edge chunks, chunks never written so they read as the
//! fill value, big-endian types, a user block) are read over random regions both ways.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use hdf5_sys::h5d::{H5Dget_space, H5Dwrite};
use hdf5_sys::h5p::H5P_DEFAULT;
use hdf5_sys::h5s::{H5S_seloper_t, H5Sclose, H5Screate_simple, H5Sselect_hyperslab};
use proptest::prelude::*;
use tet_hdf5::chunks::{ChunkAccess, ChunkedVar};
use tet_hdf5::{open_path, H5Source};
use tet_source::{ElementType, OpenOptions, Source};

fn write_region<T: hdf5::H5Type>(ds: &hdf5::Dataset, start: &[u64], count: &[u64], data: &[T]) {
    let mt = hdf5::Datatype::from_type::<T>().unwrap();
    hdf5::sync::sync(|| unsafe {
        let fs = H5Dget_space(ds.id());
        assert!(
            H5Sselect_hyperslab(
                fs,
                H5S_seloper_t::H5S_SELECT_SET,
                start.as_ptr(),
                std::ptr::null(),
                count.as_ptr(),
                std::ptr::null()
            ) >= 0
        );
        let ms = H5Screate_simple(count.len() as i32, count.as_ptr(), std::ptr::null());
        assert!(H5Dwrite(ds.id(), mt.id(), ms, fs, H5P_DEFAULT, data.as_ptr().cast()) >= 0);
        H5Sclose(ms);
        H5Sclose(fs);
    });
}

fn be_type(id: &hdf5::globals::H5GlobalConstant) -> hdf5::Datatype {
    let t = hdf5::sync::sync(|| unsafe { hdf5_sys::h5t::H5Tcopy(**id) });
    unsafe { hdf5::from_id::<hdf5::Datatype>(t) }.unwrap()
}

fn values<T: Copy>(n: usize, f: impl Fn(usize) -> T) -> Vec<T> {
    (0..n).map(f).collect()
}

/// Writes the test datasets; `userblock` > 0 puts a user block before the superblock.
fn make_file(path: &Path, userblock: u64) {
    let f = if userblock > 0 {
        hdf5::File::with_options()
            .with_fcpl(|p| p.userblock(userblock))
            .create(path)
            .unwrap()
    } else {
        hdf5::File::create(path).unwrap()
    };
    // Fully written, shuffle + deflate, partial edge chunks.
    let ds = f
        .new_dataset::<f32>()
        .shape([37, 53])
        .chunk([8, 10])
        .shuffle()
        .deflate(4)
        .create("f32_gz")
        .unwrap();
    let v = values(37 * 53, |i| (i as f32 * 0.37).sin() * 100.0);
    write_region(&ds, &[0, 0], &[37, 53], &v);

    // Only some chunks written: the rest read as the fill value.
    let g = f.create_group("sparse").unwrap();
    let ds = g
        .new_dataset::<f64>()
        .shape([50, 41])
        .chunk([16, 16])
        .deflate(1)
        .fill_value(-7.25f64)
        .create("f64_fill")
        .unwrap();
    write_region(&ds, &[0, 0], &[10, 10], &values(100, |i| i as f64 * 1.5));
    write_region(&ds, &[40, 33], &[10, 8], &values(80, |i| -(i as f64)));

    // Big-endian, shuffle + deflate, partly written, non-zero fill.
    let ds = g
        .new_dataset_builder()
        .empty_as(be_type(&hdf5::globals::H5T_STD_I32BE))
        .shape([29, 31])
        .chunk([7, 9])
        .shuffle()
        .deflate(5)
        .fill_value(123i32)
        .create("i32_be")
        .unwrap();
    write_region(
        &ds,
        &[3, 2],
        &[20, 25],
        &values(500, |i| (i as i32 - 250) * 1_000_003),
    );

    // Fletcher32 + shuffle + deflate.
    let ds = f
        .new_dataset::<u16>()
        .shape([100])
        .chunk([13])
        .fletcher32()
        .shuffle()
        .deflate(2)
        .create("u16_fl")
        .unwrap();
    write_region(
        &ds,
        &[0],
        &[100],
        &values(100, |i| (i * 613 % 65536) as u16),
    );

    // Three axes, i8, deflate only.
    let ds = f
        .new_dataset::<i8>()
        .shape([9, 10, 11])
        .chunk([4, 3, 5])
        .deflate(9)
        .create("i8_3d")
        .unwrap();
    write_region(
        &ds,
        &[0, 0, 0],
        &[9, 10, 11],
        &values(990, |i| (i % 256) as u8 as i8),
    );

    // Chunked without filters, partly written, default (zero) fill.
    let ds = f
        .new_dataset::<u64>()
        .shape([20, 20])
        .chunk([6, 7])
        .create("u64_plain")
        .unwrap();
    write_region(
        &ds,
        &[5, 5],
        &[10, 10],
        &values(100, |i| u64::MAX - i as u64),
    );

    // Big-endian f64, chunked, deflate, fully written.
    let ds = f
        .new_dataset_builder()
        .empty_as(be_type(&hdf5::globals::H5T_IEEE_F64BE))
        .shape([13, 7])
        .chunk([5, 5])
        .deflate(3)
        .create("f64_be")
        .unwrap();
    write_region(
        &ds,
        &[0, 0],
        &[13, 7],
        &values(91, |i| i as f64 / 7.0 - 3.0),
    );

    // Contiguous big-endian f64 (positioned reads + swap).
    let ds = f
        .new_dataset_builder()
        .empty_as(be_type(&hdf5::globals::H5T_IEEE_F64BE))
        .shape([13, 7])
        .create("f64_be_contig")
        .unwrap();
    write_region(&ds, &[0, 0], &[13, 7], &values(91, |i| i as f64 / 3.0));

    // More chunks than the open-time chunk table holds (lazy lookups), some never written.
    let ds = f
        .new_dataset::<u8>()
        .shape([70, 70])
        .chunk([1, 1])
        .deflate(1)
        .fill_value(9u8)
        .create("many")
        .unwrap();
    write_region(&ds, &[0, 0], &[60, 70], &values(4200, |i| (i % 251) as u8));

    // Chunked compound with a big-endian member: fields cut from raw records.
    hdf5::sync::sync(|| unsafe {
        use hdf5_sys::h5t::*;
        let t = H5Tcreate(H5T_class_t::H5T_COMPOUND, 10);
        let a = std::ffi::CString::new("a").unwrap();
        let b = std::ffi::CString::new("b").unwrap();
        H5Tinsert(t, a.as_ptr(), 0, *hdf5::globals::H5T_STD_I16BE);
        H5Tinsert(t, b.as_ptr(), 2, *hdf5::globals::H5T_IEEE_F64LE);
        let dcpl = hdf5_sys::h5p::H5Pcreate(*hdf5::globals::H5P_DATASET_CREATE);
        hdf5_sys::h5p::H5Pset_chunk(dcpl, 1, [7u64].as_ptr());
        hdf5_sys::h5p::H5Pset_deflate(dcpl, 3);
        let space = H5Screate_simple(1, [20u64].as_ptr(), std::ptr::null());
        let name = std::ffi::CString::new("records").unwrap();
        let ds = hdf5_sys::h5d::H5Dcreate2(
            f.id(),
            name.as_ptr(),
            t,
            space,
            H5P_DEFAULT,
            dcpl,
            H5P_DEFAULT,
        );
        assert!(ds >= 0);
        let mut bytes = Vec::new();
        for i in 0..20i16 {
            bytes.extend_from_slice(&(i * 100 - 7).to_be_bytes());
            bytes.extend_from_slice(&(i as f64 * 0.5).to_le_bytes());
        }
        assert!(
            H5Dwrite(
                ds,
                t,
                hdf5_sys::h5s::H5S_ALL,
                hdf5_sys::h5s::H5S_ALL,
                H5P_DEFAULT,
                bytes.as_ptr().cast()
            ) >= 0
        );
        hdf5_sys::h5d::H5Dclose(ds);
        H5Sclose(space);
        hdf5_sys::h5p::H5Pclose(dcpl);
        H5Tclose(t);
    });

    // Contiguous i16, never written (no storage: read through the library as fill).
    f.new_dataset::<i16>()
        .shape([4, 6])
        .fill_value(-3i16)
        .create("i16_unwritten")
        .unwrap();
}

struct Fixture {
    _dir: tempfile::TempDir,
    plain: PathBuf,
    ublock: PathBuf,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("fast.h5");
        let ublock = dir.path().join("ublock.h5");
        make_file(&plain, 0);
        make_file(&ublock, 512);
        Fixture {
            _dir: dir,
            plain,
            ublock,
        }
    })
}

fn sources() -> &'static (H5Source, H5Source) {
    static S: OnceLock<(H5Source, H5Source)> = OnceLock::new();
    S.get_or_init(|| {
        let f = fixture();
        (
            open_path(&f.plain, &OpenOptions::default()).unwrap(),
            open_path(&f.ublock, &OpenOptions::default()).unwrap(),
        )
    })
}

fn index_of(src: &H5Source, name: &str) -> usize {
    src.variables()
        .iter()
        .position(|v| v.name == name)
        .unwrap_or_else(|| panic!("no {name}"))
}

fn read(src: &H5Source, var: usize, start: &[u64], count: &[u64]) -> Vec<u8> {
    let v = &src.variables()[var];
    let n: u64 = count.iter().product();
    let mut out = vec![0u8; n as usize * v.dtype.size()];
    src.read_region(var, start, count, &mut out).unwrap();
    out
}

fn read_lib(src: &H5Source, var: usize, start: &[u64], count: &[u64]) -> Vec<u8> {
    let v = &src.variables()[var];
    let n: u64 = count.iter().product();
    let mut out = vec![0u8; n as usize * v.dtype.size()];
    src.read_region_via_library(var, start, count, &mut out)
        .unwrap();
    out
}

const CHUNKED: &[&str] = &[
    "f32_gz",
    "sparse/f64_fill",
    "sparse/i32_be",
    "u16_fl",
    "i8_3d",
    "u64_plain",
    "f64_be",
    "many",
];

#[test]
fn all_chunked_datasets_go_direct() {
    let (src, ub) = sources();
    for s in [src, ub] {
        let direct = s.direct_chunk_variables();
        for n in CHUNKED {
            assert!(direct.contains(n), "{n}: {direct:?}");
        }
        assert_eq!(s.library_read_variables(), vec!["i16_unwritten"]);
        assert!(s.parallel_reads());
    }
}

#[test]
fn whole_datasets_equal_the_library() {
    let (src, ub) = sources();
    for n in CHUNKED.iter().chain(&["f64_be_contig", "i16_unwritten"]) {
        let i = index_of(src, n);
        let shape = src.variables()[i].shape.clone();
        let zero = vec![0; shape.len()];
        let a = read(src, i, &zero, &shape);
        assert_eq!(a, read_lib(src, i, &zero, &shape), "{n}");
        let j = index_of(ub, n);
        assert_eq!(a, read(ub, j, &zero, &shape), "{n} with a user block");
    }
}

#[test]
fn known_values() {
    let (src, _) = sources();
    let f64s = |b: Vec<u8>| -> Vec<f64> {
        b.chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    // Fill value where nothing was written, data where it was.
    let i = index_of(src, "sparse/f64_fill");
    assert_eq!(f64s(read(src, i, &[20, 20], &[2, 2])), vec![-7.25; 4]);
    assert_eq!(f64s(read(src, i, &[0, 0], &[1, 3])), vec![0.0, 1.5, 3.0]);
    assert_eq!(f64s(read(src, i, &[49, 40], &[1, 1])), vec![-79.0]);
    let i = index_of(src, "sparse/i32_be");
    assert_eq!(src.variables()[i].dtype, ElementType::I32);
    let b = read(src, i, &[0, 0], &[1, 2]);
    assert_eq!(b, [123i32.to_le_bytes(), 123i32.to_le_bytes()].concat());
    let b = read(src, i, &[3, 2], &[1, 1]);
    assert_eq!(b, (-250i32 * 1_000_003).to_le_bytes());
    let i = index_of(src, "f64_be_contig");
    assert_eq!(
        f64s(read(src, i, &[1, 0], &[1, 2])),
        vec![7.0 / 3.0, 8.0 / 3.0]
    );
    assert!(
        src.file_extent(i).is_none(),
        "big-endian data is not lent as a file extent"
    );
    let i = index_of(src, "i16_unwritten");
    assert_eq!(read(src, i, &[0, 0], &[1, 1]), (-3i16).to_le_bytes());

    // The chunk index knows which chunks exist.
    let f = fixture();
    let ChunkAccess::Direct(cv) = ChunkedVar::open(&f.plain, "/sparse/f64_fill").unwrap() else {
        panic!("not direct");
    };
    // (0, 0), and (2, 2) and (3, 2) under the second write.
    assert_eq!(cv.stored_chunks(), 3);
    assert!(cv.chunk_location(&[3, 2]).is_some());
    assert_eq!(cv.chunk_shape(), &[16, 16]);
    assert_eq!(cv.fill_value(), (-7.25f64).to_le_bytes());
    assert!(cv.chunk_location(&[0, 0]).is_some());
    assert!(cv.chunk_location(&[1, 1]).is_none());
    assert!(cv.chunk_location(&[9, 9]).is_none());
    let ChunkAccess::Direct(many) = ChunkedVar::open(&f.plain, "/many").unwrap() else {
        panic!("not direct");
    };
    assert!(!many.has_chunk_table());
    assert_eq!(many.stored_chunks(), 4200);
    assert!(cv.has_chunk_table());
    let i = index_of(src, "many");
    assert_eq!(
        read(src, i, &[59, 68], &[2, 2]),
        vec![(4198 % 251) as u8, (4199 % 251) as u8, 9, 9]
    );
    // Compound fields from a chunked dataset (big-endian member swapped).
    assert!(src.direct_chunk_variables().contains(&"records/a"));
    let i = index_of(src, "records/a");
    let got = read(src, i, &[5], &[3]);
    let want: Vec<u8> = [493i16, 593, 693]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(got, want);
    let i = index_of(src, "records/b");
    assert_eq!(f64s(read(src, i, &[6], &[2])), vec![3.0, 3.5]);
    let ChunkAccess::Library(why) = ChunkedVar::open(&f.plain, "/f64_be_contig").unwrap() else {
        panic!("contiguous is not direct");
    };
    assert!(why.contains("not chunked"), "{why}");
}

/// Reads into an output full of stale bytes (the decode path must overwrite all of it).
fn read_stale(src: &H5Source, var: usize, start: &[u64], count: &[u64]) -> Vec<u8> {
    let v = &src.variables()[var];
    let n: u64 = count.iter().product();
    let mut out = vec![0xA5u8; n as usize * v.dtype.size()];
    src.read_region(var, start, count, &mut out).unwrap();
    out
}

/// Regions of whole chunks (decoded straight into the output when the chunk's rows are adjacent
/// there), stacks of two chunks along the first axis, edge chunks, and the same shifted by one
/// element (which cuts every chunk), into stale outputs. All on one thread, dataset after
/// dataset, so the reused per-thread buffers hold other datasets' (larger or smaller) chunks.
#[test]
fn chunk_aligned_regions_into_stale_buffers() {
    let (src, _) = sources();
    let f = fixture();
    for _ in 0..2 {
        for name in CHUNKED {
            let i = index_of(src, name);
            let shape = src.variables()[i].shape.clone();
            let ChunkAccess::Direct(cv) = ChunkedVar::open(&f.plain, &format!("/{name}")).unwrap()
            else {
                panic!("{name}: not direct");
            };
            let chunk = cv.chunk_shape().to_vec();
            let grid: Vec<u64> = shape
                .iter()
                .zip(&chunk)
                .map(|(&s, &c)| s.div_ceil(c))
                .collect();
            let n: u64 = grid.iter().product();
            // Every chunk of small grids, every 97th of `many` (4900 chunks).
            let step = if n > 1000 { 97 } else { 1 };
            for k in (0..n).step_by(step) {
                let mut rest = k;
                let mut start = vec![0u64; grid.len()];
                for a in (0..grid.len()).rev() {
                    start[a] = rest % grid[a] * chunk[a];
                    rest /= grid[a];
                }
                for (stack, shift) in [(1, 0), (2, 0), (1, 1)] {
                    let st: Vec<u64> = start
                        .iter()
                        .zip(&shape)
                        .map(|(&s, &d)| (s + shift).min(d - 1))
                        .collect();
                    let count: Vec<u64> = (0..grid.len())
                        .map(|a| {
                            let c = if a == 0 { chunk[a] * stack } else { chunk[a] };
                            c.min(shape[a] - st[a])
                        })
                        .collect();
                    let got = read_stale(src, i, &st, &count);
                    assert!(
                        got == read_lib(src, i, &st, &count),
                        "{name} at {st:?} count {count:?}"
                    );
                }
            }
        }
    }
}

/// A region that holds the chunks in order along its last axes (chunk rows adjacent in the
/// output): 1-D datasets, and a chunk stack whose other axes span the whole dataset.
#[test]
fn whole_chunk_runs_decode_in_place() {
    let (src, _) = sources();
    let i = index_of(src, "u16_fl");
    for (a, c) in [(0, 13), (13, 26), (26, 74), (0, 100), (91, 9)] {
        assert_eq!(
            read_stale(src, i, &[a], &[c]),
            read_lib(src, i, &[a], &[c]),
            "{a} {c}"
        );
    }
    let i = index_of(src, "many");
    assert_eq!(
        read_stale(src, i, &[0, 0], &[70, 70]),
        read_lib(src, i, &[0, 0], &[70, 70])
    );
    let i = index_of(src, "i8_3d");
    assert_eq!(
        read_stale(src, i, &[4, 0, 0], &[4, 10, 11]),
        read_lib(src, i, &[4, 0, 0], &[4, 10, 11])
    );
}

fn region_strategy(shape: Vec<u64>) -> impl Strategy<Value = (Vec<u64>, Vec<u64>)> {
    let axes: Vec<_> = shape
        .iter()
        .map(|&d| (0..d).prop_flat_map(move |s| (Just(s), 1..=d - s)))
        .collect();
    axes.prop_map(|v| v.into_iter().unzip())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_regions_equal_the_library(which in 0..CHUNKED.len(), seed in any::<u64>()) {
        let (src, ub) = sources();
        let name = CHUNKED[which];
        let i = index_of(src, name);
        let shape = src.variables()[i].shape.clone();
        // Derive a region from the seed (one strategy for every dataset shape).
        let mut s = seed;
        let mut next = |m: u64| { s ^= s << 13; s ^= s >> 7; s ^= s << 17; s % m };
        let mut start = Vec::new();
        let mut count = Vec::new();
        for &d in &shape {
            let a = next(d);
            let c = 1 + next(d - a);
            start.push(a);
            count.push(c);
        }
        let direct = read(src, i, &start, &count);
        prop_assert_eq!(&direct, &read_lib(src, i, &start, &count), "{} {:?} {:?}", name, start, count);
        let j = index_of(ub, name);
        prop_assert_eq!(&direct, &read(ub, j, &start, &count));
    }

    #[test]
    fn random_regions_f32((start, count) in region_strategy(vec![37, 53])) {
        let (src, _) = sources();
        let i = index_of(src, "f32_gz");
        prop_assert_eq!(read(src, i, &start, &count), read_lib(src, i, &start, &count));
    }
}

#[test]
fn concurrent_reads_agree() {
    let (src, _) = sources();
    let i = index_of(src, "f32_gz");
    let whole = read(src, i, &[0, 0], &[37, 53]);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let whole = &whole;
            s.spawn(move || {
                for r in 0..37u64 {
                    let row = (r + t * 5) % 37;
                    let b = read(src, i, &[row, 0], &[1, 53]);
                    assert_eq!(
                        &b[..],
                        &whole[(row * 53 * 4) as usize..((row + 1) * 53 * 4) as usize]
                    );
                }
            });
        }
    });
}

/// Speed of the direct path against `H5Dread` on a 128 MiB deflated dataset.
/// `cargo test -p tet-hdf5 --release --test main -- --ignored --nocapture fastpath::speed`
#[test]
#[ignore]
fn speed_direct_vs_library() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.h5");
    let (rows, cols) = (8192u64, 4096u64);
    {
        let f = hdf5::File::create(&path).unwrap();
        let ds = f
            .new_dataset::<f32>()
            .shape([rows as usize, cols as usize])
            .chunk([256, 1024])
            .shuffle()
            .deflate(4)
            .create("field")
            .unwrap();
        let mut x = 0x1234_5678u32;
        let data: Vec<f32> = (0..rows * cols)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let r = (i / cols) as f32;
                let c = (i % cols) as f32;
                (r * 0.01).sin() * 50.0 + (c * 0.003).cos() * 20.0 + (x % 1000) as f32 * 0.001
            })
            .collect();
        write_region(&ds, &[0, 0], &[rows, cols], &data);
    }
    let stored = std::fs::metadata(&path).unwrap().len();
    let src = open_path(&path, &OpenOptions::default()).unwrap();
    assert_eq!(src.direct_chunk_variables(), vec!["field"]);
    let band = 256u64; // one chunk row per read: 4 MiB
    let mut a = vec![0u8; (band * cols * 4) as usize];
    let mut b = a.clone();
    let t = std::time::Instant::now();
    for r in (0..rows).step_by(band as usize) {
        src.read_region(0, &[r, 0], &[band, cols], &mut a).unwrap();
    }
    let direct = t.elapsed();
    let t = std::time::Instant::now();
    for r in (0..rows).step_by(band as usize) {
        src.read_region_via_library(0, &[r, 0], &[band, cols], &mut b)
            .unwrap();
    }
    let lib = t.elapsed();
    assert_eq!(a, b);
    // Two threads on the direct path.
    let t = std::time::Instant::now();
    std::thread::scope(|s| {
        for k in 0..2u64 {
            let src = &src;
            s.spawn(move || {
                let mut buf = vec![0u8; (band * cols * 4) as usize];
                for r in (k * band..rows).step_by(2 * band as usize) {
                    src.read_region(0, &[r, 0], &[band, cols], &mut buf)
                        .unwrap();
                }
            });
        }
    });
    let direct2 = t.elapsed();
    let mib = (rows * cols * 4) as f64 / (1 << 20) as f64;
    eprintln!(
        "{mib:.0} MiB f32 (stored {:.1} MiB, shuffle+deflate(4), 1 MiB chunks): direct {:.2}s ({:.0} MiB/s), H5Dread {:.2}s ({:.0} MiB/s), direct x2 threads {:.2}s ({:.0} MiB/s)",
        stored as f64 / (1 << 20) as f64,
        direct.as_secs_f64(),
        mib / direct.as_secs_f64(),
        lib.as_secs_f64(),
        mib / lib.as_secs_f64(),
        direct2.as_secs_f64(),
        mib / direct2.as_secs_f64(),
    );
}

/// A dataset with many chunks: open time (no chunk table: lazy lookups) and a full read, direct
/// against `H5Dread`.
/// `cargo test -p tet-hdf5 --release --test main -- --ignored --nocapture fastpath::many_chunks`
#[test]
#[ignore]
fn many_chunks_timing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.h5");
    let (rows, cols) = (2000u64, 2000u64);
    {
        let f = hdf5::File::create(&path).unwrap();
        let ds = f
            .new_dataset::<u16>()
            .shape([rows as usize, cols as usize])
            .chunk([10, 10])
            .deflate(1)
            .create("tiles")
            .unwrap();
        let data: Vec<u16> = (0..rows * cols).map(|i| (i % 65521) as u16).collect();
        write_region(&ds, &[0, 0], &[rows, cols], &data);
    }
    let t = std::time::Instant::now();
    let src = open_path(&path, &OpenOptions::default()).unwrap();
    let open = t.elapsed();
    let mut a = vec![0u8; (rows * cols * 2) as usize];
    let mut b = a.clone();
    let t = std::time::Instant::now();
    src.read_region(0, &[0, 0], &[rows, cols], &mut a).unwrap();
    let direct = t.elapsed();
    let t = std::time::Instant::now();
    src.read_region_via_library(0, &[0, 0], &[rows, cols], &mut b)
        .unwrap();
    let lib = t.elapsed();
    assert_eq!(a, b);
    eprintln!(
        "40000 chunks of 200 B: open {:.3}s, full read direct (lazy lookups) {:.2}s, H5Dread {:.2}s",
        open.as_secs_f64(),
        direct.as_secs_f64(),
        lib.as_secs_f64()
    );
}

/// Where the time of the direct path goes, per stage, on the speed test's data.
#[test]
#[ignore]
fn speed_stages() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.h5");
    let (rows, cols) = (2048u64, 4096u64);
    {
        let f = hdf5::File::create(&path).unwrap();
        let ds = f
            .new_dataset::<f32>()
            .shape([rows as usize, cols as usize])
            .chunk([256, 1024])
            .shuffle()
            .deflate(4)
            .create("field")
            .unwrap();
        let mut x = 0x1234_5678u32;
        let data: Vec<f32> = (0..rows * cols)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let r = (i / cols) as f32;
                let c = (i % cols) as f32;
                (r * 0.01).sin() * 50.0 + (c * 0.003).cos() * 20.0 + (x % 1000) as f32 * 0.001
            })
            .collect();
        write_region(&ds, &[0, 0], &[rows, cols], &data);
    }
    let ChunkAccess::Direct(cv) = ChunkedVar::open(&path, "/field").unwrap() else {
        panic!()
    };
    let file = std::fs::File::open(&path).unwrap();
    let (mut t_read, mut t_inflate, mut t_unshuffle) = (0f64, 0f64, 0f64);
    let mut n = 0;
    for gr in 0..rows / 256 {
        for gc in 0..cols / 1024 {
            let loc = cv.chunk_location(&[gr, gc]).unwrap();
            let t = std::time::Instant::now();
            let mut stored = vec![0u8; loc.size as usize];
            file.read_exact_at(&mut stored, loc.offset).unwrap();
            t_read += t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            let z = tet_hdf5::filters::inflate(&stored, 1 << 20).unwrap();
            t_inflate += t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            let mut out = vec![0u8; z.len()];
            tet_hdf5::filters::unshuffle(&z, 4, &mut out);
            t_unshuffle += t.elapsed().as_secs_f64();
            n += 1;
        }
    }
    eprintln!(
        "{n} chunks of 1 MiB: pread {t_read:.3}s, inflate {t_inflate:.3}s, unshuffle {t_unshuffle:.3}s"
    );
}
