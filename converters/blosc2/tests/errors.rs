//! Errors of the frame decoder on inputs that are not frames (real frames are covered by
//! tet-hdf5's tests/blosc2.rs and tet-tensogram's tests/codecs.rs, against files written by
//! c-blosc2 through hdf5plugin, PyTables and Python tensogram).

use tet_blosc2::{decode_frame, Blosc2Error};

#[test]
fn non_frames_are_named_errors() {
    for input in [&b""[..], b"\x9e", b"\x9e\xa8b2frameX", &[0u8; 64]] {
        let e = decode_frame(input, 16).unwrap_err();
        assert!(e.to_string().starts_with("blosc2: "), "{e}");
        assert!(matches!(e, Blosc2Error::Corrupt(_)), "{e:?}");
        assert!(!e.is_unsupported(), "{e}");
    }
    let e = decode_frame(b"\x9e\xa8b2frameX", 16).unwrap_err();
    assert!(e.to_string().contains("no b2frame magic"), "{e}");
}
