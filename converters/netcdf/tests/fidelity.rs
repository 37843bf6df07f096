//! What the importer records of text and dimensions so that an export can give the file back
//! exactly (`tests/fixtures/make_fidelity.py`, written by `ncgen`): `char` bytes that are not
//! UTF-8 (decoded as Latin-1, recorded), a 0-d `char` told from a 0-d `string`, single-valued
//! `string` attributes told from `char` ones, unlimited dimensions of text variables, and
//! dimensions no variable uses. The round trip itself is the root test `netcdf_fidelity.rs`.

use std::path::{Path, PathBuf};

use tet_netcdf::dump::{dump, RawValues};
use tet_netcdf::{open_path, LATIN1_ATTRS, STRING_ATTRS, TEXT_ENCODING, TEXT_TYPE, UNUSED_DIM};
use tet_source::{AttrValue, Fact, OpenOptions, Source, TextVariable};
use tet_testkit::private_fact;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn text<'a>(src: &'a dyn Source, name: &str) -> &'a TextVariable {
    src.text_variables()
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no text variable {name}"))
}

fn unlimited(facts: &[Fact]) -> Option<&[String]> {
    facts.iter().find_map(|f| match f {
        Fact::UnlimitedDims(d) => Some(d.as_slice()),
        _ => None,
    })
}

fn texts(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Every `key` list among `facts`, joined.
fn lists(facts: &[Fact], key: &str) -> Vec<String> {
    facts
        .iter()
        .filter_map(|f| match f {
            Fact::Private {
                key: k,
                value: AttrValue::TextList(l),
                ..
            } if k == key => Some(l.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

#[test]
fn char_bytes_types_and_dimensions_are_recorded() {
    let src = open_path(&fixture("fidelity.nc"), &OpenOptions::default()).unwrap();
    let latin1 = Some(&AttrValue::Text("latin1".into()));

    let c1 = text(&src, "c1");
    assert_eq!(c1.values, texts(&["\u{80}"]));
    assert_eq!(c1.char_axis.as_ref().map(|c| c.len), Some(1));
    assert_eq!(private_fact(&c1.facts, "nc", TEXT_ENCODING), latin1);
    assert_eq!(text(&src, "cr").values, texts(&["\u{80}\u{7f}"]));
    let l = text(&src, "latin");
    assert_eq!(l.values, texts(&["ét", "abc", "ÿþýü"]));
    assert_eq!(private_fact(&l.facts, "nc", TEXT_ENCODING), latin1);
    assert_eq!(lists(&l.facts, LATIN1_ATTRS), texts(&["long_name"]));
    assert_eq!(lists(&l.facts, STRING_ATTRS), texts(&["flavour"]));
    // Valid UTF-8: decoded as before, nothing recorded.
    let u = text(&src, "utf");
    assert_eq!(u.values, texts(&["ét", "ab", "x"]));
    assert!(u.facts.is_empty(), "{:?}", u.facts);

    // 0-d char and 0-d string.
    let c = text(&src, "c");
    assert_eq!((c.shape.as_slice(), c.char_axis.is_none()), (&[][..], true));
    assert_eq!(
        private_fact(&c.facts, "nc", TEXT_TYPE),
        Some(&AttrValue::Text("char".into()))
    );
    let s = text(&src, "s");
    assert_eq!(s.values, texts(&["hello"]));
    assert_eq!(private_fact(&s.facts, "nc", TEXT_TYPE), None);
    let sl = text(&src, "slatin");
    assert_eq!(sl.values, texts(&["é", "ok", "\u{80}"]));
    assert_eq!(private_fact(&sl.facts, "nc", TEXT_ENCODING), latin1);

    // Unlimited dimensions of text variables, the string axis included.
    assert_eq!(
        unlimited(&text(&src, "recnames").facts),
        Some(&texts(&["rec"])[..])
    );
    assert_eq!(
        unlimited(&text(&src, "line").facts),
        Some(&texts(&["line_len"])[..])
    );

    // Attributes of a numeric variable and of the groups.
    let v = src.variables().iter().find(|v| v.name == "v").unwrap();
    assert_eq!(lists(&v.facts, STRING_ATTRS), texts(&["sattr", "slatin"]));
    assert_eq!(
        lists(&v.facts, LATIN1_ATTRS),
        texts(&["att_latin", "slatin"])
    );
    let g = src.global_facts();
    assert_eq!(lists(g, STRING_ATTRS), texts(&["g_single", "sub/gs"]));
    assert_eq!(
        lists(g, LATIN1_ATTRS),
        texts(&["g_latin", "g_multi", "sub/gl"])
    );
    let unused = |name: &str| private_fact(g, "nc", &format!("{UNUSED_DIM}{name}")).cloned();
    for (name, len, unl) in [
        ("unused", 5, 0),
        ("rec_unused", 0, 1),
        ("sub/sub_unused", 7, 0),
        ("sub/sub_unl", 0, 1),
        ("onlydims/od", 2, 0),
        ("onlydims/od_unl", 0, 1),
    ] {
        assert_eq!(unused(name), Some(AttrValue::U64(vec![len, unl])), "{name}");
    }
    assert_eq!(unused("n"), None);
    assert_eq!(unused("rec"), None);
}

#[test]
fn classic_char_bytes_and_dimensions_are_recorded() {
    let src = open_path(&fixture("fidelity_classic.nc"), &OpenOptions::default()).unwrap();
    let names = text(&src, "names");
    assert_eq!(names.values, texts(&["ét", "ab"]));
    assert_eq!(unlimited(&names.facts), Some(&texts(&["rec"])[..]));
    assert_eq!(lists(&names.facts, LATIN1_ATTRS), texts(&["units"]));
    assert_eq!(text(&src, "c").values, texts(&["ÿ"]));
    let g = src.global_facts();
    assert_eq!(lists(g, LATIN1_ATTRS), texts(&["title"]));
    assert_eq!(
        private_fact(g, "nc", &format!("{UNUSED_DIM}unused")),
        Some(&AttrValue::U64(vec![4, 0]))
    );
}

#[test]
fn the_dump_shows_the_bytes_and_types_the_file_has() {
    let groups = dump(&fixture("fidelity.nc")).unwrap();
    let paths: Vec<&str> = groups.iter().map(|g| g.path.as_str()).collect();
    assert_eq!(paths, ["", "sub", "onlydims"]);
    let root = &groups[0];
    let var = |n: &str| root.vars.iter().find(|v| v.name == n).unwrap();
    assert_eq!(var("c1").values, RawValues::Bytes(vec![0x80]));
    assert_eq!(var("c1").xtype, "char");
    assert_eq!(var("c").dims, Vec::<String>::new());
    assert_eq!(var("s").xtype, "string");
    assert_eq!(
        var("latin").values,
        RawValues::Bytes(b"\xe9t\0\0abc\0\xff\xfe\xfd\xfc".to_vec())
    );
    let att = var("v").attrs.iter().find(|a| a.name == "sattr").unwrap();
    assert_eq!(
        (att.xtype.as_str(), &att.values),
        ("string", &RawValues::Strings(vec![Some(b"one".to_vec())]))
    );
    let rec = root.dims.iter().find(|d| d.name == "rec").unwrap();
    assert_eq!((rec.len, rec.unlimited), (2, true));
    assert_eq!(groups[2].dims.len(), 2);
}
