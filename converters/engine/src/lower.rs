//! Lowering: from what an importer says a file holds to what `.tet` can store, recorded so
//! that export can raise it back exactly (`export::Plan::new` is the inverse).
//!
//! | the model has                  | `.tet` stores                                   | recorded as                                   |
//! |--------------------------------|-------------------------------------------------|-----------------------------------------------|
//! | a 0-d (scalar) variable        | shape `[1]`                                     | `source_shape: []` and the note [`SCALAR_NOTE`] |
//! | `C64` / `C128` variable `x`    | `x/real` and `x/imag`, `F32` / `F64`            | [`Fact::ComplexPart`] on each part            |
//! | `I8`, `Bool`, `BF16`           | `I16`, `U8`, `F32` ([`storage_type`])           | `source_dtype` and `widened`                  |
//!
//! [`Lowered`] does the first two as a [`Source`] over the importer's source, so the rest of
//! the pipeline sees only variables `.tet` has a form for; widening happens per chunk in the
//! pipeline ([`Widen::apply`]). Importers never lower anything themselves.

use tet_source::{
    AttrValue, DimLabels, ElementType, Fact, FileExtent, Result, Role, Skipped, Source,
    TextVariable, Variable,
};

use crate::format::DType;

/// The note a 0-d variable's dataset carries (also how files written before `source_shape`
/// was recorded say it).
pub const SCALAR_NOTE: &str = "0-d scalar stored as shape [1]";

/// The dataset key that records a source shape other than the stored one (`[]` for a 0-d
/// variable stored as `[1]`).
pub const SOURCE_SHAPE_KEY: &str = "source_shape";

/// How source bytes become `.tet` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Widen {
    /// Same bytes.
    None,
    /// i8 → i16 (sign-extended).
    I8ToI16,
    /// bool (one byte, 0/1) → u8: the same bytes, recorded.
    BoolToU8,
    /// bfloat16 → f32 (exact).
    Bf16ToF32,
}

impl Widen {
    /// Output bytes per input byte.
    pub fn factor(self) -> usize {
        match self {
            Widen::None | Widen::BoolToU8 => 1,
            Widen::I8ToI16 | Widen::Bf16ToF32 => 2,
        }
    }

    /// Whether bytes must be transformed.
    pub fn converts(self) -> bool {
        matches!(self, Widen::I8ToI16 | Widen::Bf16ToF32)
    }

    /// The text recorded in the footer and report (`i8 -> i16`), `None` when nothing changed.
    pub fn describe(self) -> Option<&'static str> {
        match self {
            Widen::None => None,
            Widen::I8ToI16 => Some("i8 -> i16"),
            Widen::BoolToU8 => Some("bool -> u8"),
            Widen::Bf16ToF32 => Some("bf16 -> f32"),
        }
    }

    /// Converts `src` (source element bytes) into `dst` (cleared first).
    pub fn apply(self, src: &[u8], dst: &mut Vec<u8>) {
        dst.clear();
        match self {
            Widen::None | Widen::BoolToU8 => dst.extend_from_slice(src),
            Widen::I8ToI16 => {
                dst.reserve(src.len() * 2);
                dst.extend(src.iter().flat_map(|&b| (b as i8 as i16).to_le_bytes()));
            }
            Widen::Bf16ToF32 => {
                dst.reserve(src.len() * 2);
                dst.extend(src.chunks_exact(2).flat_map(|c| [0, 0, c[0], c[1]]));
            }
        }
    }
}

/// The `.tet` type a (real) source element type is stored as. Complex types never get here:
/// [`Lowered`] splits them into their parts first, whose type this gives.
pub fn storage_type(t: ElementType) -> (DType, Widen) {
    match t {
        ElementType::Bool => (DType::U8, Widen::BoolToU8),
        ElementType::I8 => (DType::I16, Widen::I8ToI16),
        ElementType::U8 => (DType::U8, Widen::None),
        ElementType::I16 => (DType::I16, Widen::None),
        ElementType::U16 => (DType::U16, Widen::None),
        ElementType::I32 => (DType::I32, Widen::None),
        ElementType::U32 => (DType::U32, Widen::None),
        ElementType::I64 => (DType::I64, Widen::None),
        ElementType::U64 => (DType::U64, Widen::None),
        ElementType::F16 => (DType::F16, Widen::None),
        ElementType::BF16 => (DType::F32, Widen::Bf16ToF32),
        ElementType::F32 | ElementType::C64 => (DType::F32, Widen::None),
        ElementType::F64 | ElementType::C128 => (DType::F64, Widen::None),
    }
}

/// Which part of its source variable a stored dataset is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Whole,
    Real,
    Imag,
}

/// One stored dataset: where its values come from.
#[derive(Debug, Clone, Copy)]
struct Stored {
    source: usize,
    scalar: bool,
    part: Part,
}

/// An importer's source seen as `.tet` stores it: 0-d variables as shape `[1]`, complex
/// variables as their two parts. Everything else is passed through unchanged.
pub struct Lowered<'s> {
    inner: &'s dyn Source,
    vars: Vec<Variable>,
    map: Vec<Stored>,
}

impl<'s> Lowered<'s> {
    /// Lowers the variables of `inner`.
    pub fn new(inner: &'s dyn Source) -> Self {
        let mut vars = Vec::new();
        let mut map = Vec::new();
        for (source, v) in inner.variables().iter().enumerate() {
            let scalar = v.shape.is_empty();
            let mut base = v.clone();
            if scalar {
                base.shape = vec![1];
                base.notes.insert(0, SCALAR_NOTE.into());
            }
            let Some(component) = v.dtype.complex_component() else {
                vars.push(base);
                map.push(Stored {
                    source,
                    scalar,
                    part: Part::Whole,
                });
                continue;
            };
            for (part, label) in [(Part::Real, "real"), (Part::Imag, "imag")] {
                let mut p = base.clone();
                p.name = format!("{}/{label}", v.name);
                p.dtype = component;
                p.role = Role::Data;
                p.notes.push(format!(
                    "{label} part of the complex {} variable '{}'",
                    v.dtype, v.name
                ));
                p.facts.push(Fact::ComplexPart {
                    imag: part == Part::Imag,
                    complex: v.dtype,
                });
                vars.push(p);
                map.push(Stored {
                    source,
                    scalar,
                    part,
                });
            }
        }
        Lowered { inner, vars, map }
    }

    /// The shape the importer gave stored dataset `var`, when lowering changed it (`[]` for a
    /// 0-d variable).
    pub fn source_shape(&self, var: usize) -> Option<&'static [u64]> {
        self.map.get(var).filter(|s| s.scalar).map(|_| &[][..])
    }

    fn stored(&self, var: usize) -> Result<Stored> {
        self.map.get(var).copied().ok_or_else(|| {
            tet_source::Request::NoVariable {
                var,
                count: self.map.len(),
            }
            .into()
        })
    }

    /// Whether the stored dataset `var` is its source variable's bytes unchanged (not a part).
    fn whole(&self, var: usize) -> Option<Stored> {
        self.map.get(var).copied().filter(|s| s.part == Part::Whole)
    }
}

/// The region of the source variable behind a stored region: a scalar has no axes.
fn source_region<'a>(s: Stored, start: &'a [u64], count: &'a [u64]) -> (&'a [u64], &'a [u64]) {
    if s.scalar {
        (&[], &[])
    } else {
        (start, count)
    }
}

impl Source for Lowered<'_> {
    fn variables(&self) -> &[Variable] {
        &self.vars
    }

    fn global_attrs(&self) -> &[(String, AttrValue)] {
        self.inner.global_attrs()
    }

    fn global_facts(&self) -> &[Fact] {
        self.inner.global_facts()
    }

    fn skipped(&self) -> &[Skipped] {
        self.inner.skipped()
    }

    fn text_variables(&self) -> &[TextVariable] {
        self.inner.text_variables()
    }

    fn dim_labels(&self) -> &[DimLabels] {
        self.inner.dim_labels()
    }

    fn read_region(&self, var: usize, start: &[u64], count: &[u64], out: &mut [u8]) -> Result<()> {
        let (v, _) = self.region_of(var, start, count, out.len())?;
        let s = self.stored(var)?;
        let (start, count) = source_region(s, start, count);
        let half = v.dtype.size();
        let offset = match s.part {
            Part::Whole => return self.inner.read_region(s.source, start, count, out),
            Part::Real => 0,
            Part::Imag => half,
        };
        let mut pairs = vec![0u8; out.len() * 2];
        self.inner.read_region(s.source, start, count, &mut pairs)?;
        for (dst, pair) in out.chunks_exact_mut(half).zip(pairs.chunks_exact(2 * half)) {
            dst.copy_from_slice(&pair[offset..offset + half]);
        }
        Ok(())
    }

    fn parallel_reads(&self) -> bool {
        self.inner.parallel_reads()
    }

    fn file_extent(&self, var: usize) -> Option<FileExtent<'_>> {
        self.whole(var)
            .and_then(|s| self.inner.file_extent(s.source))
    }

    fn zstd_frames(&self, var: usize) -> bool {
        self.whole(var)
            .is_some_and(|s| self.inner.zstd_frames(s.source))
    }

    fn zstd_frame(&self, var: usize, start: &[u64], count: &[u64]) -> Result<Option<Vec<u8>>> {
        match self.whole(var) {
            Some(s) => {
                let (start, count) = source_region(s, start, count);
                self.inner.zstd_frame(s.source, start, count)
            }
            None => Ok(None),
        }
    }

    fn contiguous_bytes(&self, var: usize) -> Option<&[u8]> {
        self.whole(var)
            .and_then(|s| self.inner.contiguous_bytes(s.source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source of one complex 0-d value and one 2-element c64 vector.
    struct Complex;

    impl Source for Complex {
        fn variables(&self) -> &[Variable] {
            static V: std::sync::OnceLock<Vec<Variable>> = std::sync::OnceLock::new();
            V.get_or_init(|| {
                vec![
                    Variable::new("z", ElementType::C128, vec![]),
                    Variable::new("v", ElementType::C64, vec![2]),
                ]
            })
        }

        fn read_region(
            &self,
            var: usize,
            start: &[u64],
            count: &[u64],
            out: &mut [u8],
        ) -> Result<()> {
            self.region_of(var, start, count, out.len())?;
            if var == 0 {
                out[..8].copy_from_slice(&1.5f64.to_le_bytes());
                out[8..].copy_from_slice(&(-2.5f64).to_le_bytes());
            } else {
                let vals = [1f32, 2., 3., 4.];
                let s = start[0] as usize * 2;
                for (o, x) in out.chunks_exact_mut(4).zip(&vals[s..]) {
                    o.copy_from_slice(&x.to_le_bytes());
                }
            }
            Ok(())
        }
    }

    #[test]
    fn complex_and_scalar_are_lowered_and_read_back() {
        let src = Complex;
        let l = Lowered::new(&src);
        let names: Vec<_> = l.variables().iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["z/real", "z/imag", "v/real", "v/imag"]);
        assert_eq!(l.variables()[0].shape, [1]);
        assert_eq!(l.variables()[0].notes[0], SCALAR_NOTE);
        assert_eq!(l.variables()[1].dtype, ElementType::F64);
        assert_eq!(
            l.variables()[1].facts,
            [Fact::ComplexPart {
                imag: true,
                complex: ElementType::C128
            }]
        );
        let mut b = [0u8; 8];
        l.read_region(1, &[0], &[1], &mut b).unwrap();
        assert_eq!(f64::from_le_bytes(b), -2.5);
        let mut b = [0u8; 4];
        l.read_region(3, &[1], &[1], &mut b).unwrap();
        assert_eq!(f32::from_le_bytes(b), 4.0);
        l.read_region(2, &[1], &[1], &mut b).unwrap();
        assert_eq!(f32::from_le_bytes(b), 3.0);
        assert!(l.read_region(0, &[0], &[2], &mut [0u8; 16]).is_err());
        assert!(l.file_extent(0).is_none());
    }
}
