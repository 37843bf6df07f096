//! Parsing of the TeaFile header: the four mandatory int64 values and the optional sections.
//!
//! Everything here works on a borrowed byte slice and never panics: every offset is computed
//! with checked arithmetic, every read is bounds-checked, and every count read from the file is
//! compared with the bytes that remain before anything is allocated for it.

use tet_source::{Part, Request, Result, SourceError};

/// The magic value of every TeaFile, read as an int64 in the file's byte order.
pub const MAGIC: u64 = 0x0d0e_0a04_0208_0500;

/// Size of the mandatory header (magic, ItemStart, ItemEnd, SectionCount).
pub const MANDATORY_HEADER_LEN: u64 = 32;

/// Section id of the item section.
pub const SECTION_ITEM: i32 = 0x0a;
/// Section id of the time section.
pub const SECTION_TIME: i32 = 0x40;
/// Section id of the content description section.
pub const SECTION_CONTENT: i32 = 0x80;
/// Section id of the name/value section.
pub const SECTION_NAME_VALUE: i32 = 0x81;

/// Field type id of the .NET decimal (platform specific, 16 bytes).
pub const FIELD_NET_DECIMAL: i32 = 0x200;
/// Smallest field type id of private (custom) extensions.
pub const FIELD_CUSTOM: i32 = 0x1000;

/// The byte order of a TeaFile (of its header integers and of its items alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    Little,
    Big,
}

impl ByteOrder {
    /// Detects the byte order from the first 8 bytes: the magic read as an int64 in either order.
    pub fn detect(head: &[u8]) -> Option<ByteOrder> {
        let bytes: [u8; 8] = head.get(..8)?.try_into().ok()?;
        if u64::from_le_bytes(bytes) == MAGIC {
            Some(ByteOrder::Little)
        } else if u64::from_be_bytes(bytes) == MAGIC {
            Some(ByteOrder::Big)
        } else {
            None
        }
    }

    /// `"little"` or `"big"`.
    pub fn name(self) -> &'static str {
        match self {
            ByteOrder::Little => "little",
            ByteOrder::Big => "big",
        }
    }
}

/// One section as it appears in the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionInfo {
    /// Section id (`0x0a`, `0x40`, `0x80`, `0x81`, or a custom/unknown id).
    pub id: i32,
    /// Absolute offset of the section id in the file.
    pub offset: u64,
    /// The next-section offset as stored (relative to the end of that int32 field). For the last
    /// section it is ignored, as the spec says.
    pub next_section_offset: i32,
    /// Length of the section body in bytes (up to the next section, or up to ItemStart for the
    /// last one).
    pub body_len: u64,
}

/// One field of the item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldInfo {
    /// Field name as stored (UTF-8).
    pub name: String,
    /// Field type id (1–10 primitive, `0x200` .NET decimal, `>= 0x1000` custom).
    pub field_type: i32,
    /// Byte offset inside the item.
    pub offset: u32,
}

/// The item section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemInfo {
    /// Item type name (e.g. `Tick`).
    pub name: String,
    /// Item size in bytes, padding included (> 0).
    pub size: u32,
    /// The fields, in file order.
    pub fields: Vec<FieldInfo>,
}

/// The time section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeInfo {
    /// Epoch as days since 0001-01-01 (proleptic Gregorian); 719162 = 1970-01-01.
    pub epoch_days: i64,
    /// Ticks per day (> 0); 86400000 = milliseconds.
    pub ticks_per_day: i64,
    /// Time field offsets as stored; the first is the event time.
    pub field_offsets: Vec<u32>,
    /// For each distinct offset of `field_offsets` (in order, duplicates dropped), the index in
    /// [`ItemInfo::fields`] of the first field starting at that offset.
    pub fields: Vec<usize>,
}

/// A name/value pair value.
#[derive(Debug, Clone, PartialEq)]
pub enum NameValue {
    /// Kind 1.
    Int32(i32),
    /// Kind 2.
    Double(f64),
    /// Kind 3.
    Text(String),
    /// Kind 4: 16 raw bytes, kept in file order (RFC 4122 order).
    Uuid([u8; 16]),
}

/// Something the header holds that cannot be mapped, with the reason. The importer either
/// fails on it or lists it as skipped, depending on `skip_unsupported`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderProblem {
    pub name: String,
    pub reason: String,
}

/// Everything read from a TeaFile header.
#[derive(Debug, Clone, PartialEq)]
pub struct TeaHeader {
    pub byte_order: ByteOrder,
    /// Absolute offset of the item area.
    pub item_start: u64,
    /// ItemEnd as stored (0 = the item area ends at the end of the file).
    pub item_end: u64,
    /// Size of the whole file (or buffer).
    pub file_len: u64,
    pub sections: Vec<SectionInfo>,
    pub item: Option<ItemInfo>,
    pub time: Option<TimeInfo>,
    /// The content description.
    pub content: Option<String>,
    /// Name/value pairs, in file order.
    pub name_values: Vec<(String, NameValue)>,
    /// Number of whole items in the item area (0 without an item section).
    pub item_count: u64,
    /// Bytes of a trailing partial item inside the item area (not part of any item).
    pub trailing_bytes: u64,
    /// Things the header holds that cannot be read or mapped (an unknown name/value kind).
    pub problems: Vec<HeaderProblem>,
}

impl TeaHeader {
    /// End of the logical item area (ItemEnd, or the file size when ItemEnd is 0).
    pub fn item_area_end(&self) -> u64 {
        if self.item_end == 0 {
            self.file_len
        } else {
            self.item_end
        }
    }

    /// Length of the logical item area in bytes.
    pub fn item_area_len(&self) -> u64 {
        self.item_area_end().saturating_sub(self.item_start)
    }
}

/// Size in bytes of a field type, when known.
pub fn field_type_size(field_type: i32) -> Option<u32> {
    match field_type {
        1 | 5 => Some(1),
        2 | 6 => Some(2),
        3 | 7 | 9 => Some(4),
        4 | 8 | 10 => Some(8),
        FIELD_NET_DECIMAL => Some(16),
        _ => None,
    }
}

/// Name of a field type: the spec's enum name (`Int8` … `Double`, `NetDecimal`), `Custom` for
/// private extensions (`>= 0x1000`) and `Unknown` for anything else.
pub fn field_type_name(field_type: i32) -> &'static str {
    match field_type {
        1 => "Int8",
        2 => "Int16",
        3 => "Int32",
        4 => "Int64",
        5 => "UInt8",
        6 => "UInt16",
        7 => "UInt32",
        8 => "UInt64",
        9 => "Float",
        10 => "Double",
        FIELD_NET_DECIMAL => "NetDecimal",
        t if t >= FIELD_CUSTOM => "Custom",
        _ => "Unknown",
    }
}

fn malformed(msg: impl Into<String>) -> SourceError {
    Part::Header.malformed(msg)
}

fn section_name(id: i32) -> String {
    match id {
        SECTION_ITEM => "item section".to_string(),
        SECTION_TIME => "time section".to_string(),
        SECTION_CONTENT => "content description section".to_string(),
        SECTION_NAME_VALUE => "name/value section".to_string(),
        _ => format!("section 0x{id:x}"),
    }
}

/// A bounds-checked cursor over a section body.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Absolute file offset of `buf[0]`, for messages.
    base: u64,
    order: ByteOrder,
    what: String,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    fn abs(&self) -> u64 {
        self.base.saturating_add(self.pos as u64)
    }

    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(malformed(format!(
                "{} is truncated: {} needs {} bytes at offset {}, only {} remain in the section",
                self.what,
                field,
                n,
                self.abs(),
                self.remaining()
            ))),
        }
    }

    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N]> {
        let s = self.take(N, field)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn i32(&mut self, field: &str) -> Result<i32> {
        let a = self.array::<4>(field)?;
        Ok(match self.order {
            ByteOrder::Little => i32::from_le_bytes(a),
            ByteOrder::Big => i32::from_be_bytes(a),
        })
    }

    /// An int32 that must be `>= 0`.
    fn count(&mut self, field: &str) -> Result<u32> {
        let at = self.abs();
        let v = self.i32(field)?;
        u32::try_from(v).map_err(|_| {
            malformed(format!(
                "{}: {} is {} (at offset {}), must not be negative",
                self.what, field, v, at
            ))
        })
    }

    fn i64(&mut self, field: &str) -> Result<i64> {
        let a = self.array::<8>(field)?;
        Ok(match self.order {
            ByteOrder::Little => i64::from_le_bytes(a),
            ByteOrder::Big => i64::from_be_bytes(a),
        })
    }

    fn f64(&mut self, field: &str) -> Result<f64> {
        let a = self.array::<8>(field)?;
        Ok(match self.order {
            ByteOrder::Little => f64::from_le_bytes(a),
            ByteOrder::Big => f64::from_be_bytes(a),
        })
    }

    /// A length-prefixed (int32) UTF-8 string.
    fn string(&mut self, field: &str) -> Result<String> {
        let at = self.abs();
        let len = self.i32(field)?;
        let len = usize::try_from(len).map_err(|_| {
            malformed(format!(
                "{}: {} has negative length {} (at offset {})",
                self.what, field, len, at
            ))
        })?;
        if len > self.remaining() {
            return Err(malformed(format!(
                "{}: {} declares {} bytes (at offset {}), only {} remain in the section",
                self.what,
                field,
                len,
                at,
                self.remaining()
            )));
        }
        let bytes = self.take(len, field)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| {
            malformed(format!(
                "{}: {} (at offset {}) is not valid UTF-8",
                self.what, field, at
            ))
        })
    }

    /// Refuses a count of items of at least `min_each` bytes each that cannot fit in the rest of
    /// the section (before anything is allocated for it).
    fn check_fits(&self, count: u32, min_each: usize, field: &str) -> Result<()> {
        let need = (count as usize).checked_mul(min_each);
        match need {
            Some(n) if n <= self.remaining() => Ok(()),
            _ => Err(malformed(format!(
                "{}: {} is {}, but only {} bytes remain in the section (each needs at least {})",
                self.what,
                field,
                count,
                self.remaining(),
                min_each
            ))),
        }
    }
}

fn read_i64(bytes: &[u8], at: usize, order: ByteOrder) -> Result<i64> {
    let s = bytes
        .get(at..at.saturating_add(8))
        .ok_or_else(|| malformed("file is shorter than the 32-byte TeaFile header"))?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Ok(match order {
        ByteOrder::Little => i64::from_le_bytes(a),
        ByteOrder::Big => i64::from_be_bytes(a),
    })
}

fn read_i32(bytes: &[u8], at: usize, order: ByteOrder) -> Option<i32> {
    let s = bytes.get(at..at.checked_add(4)?)?;
    let mut a = [0u8; 4];
    a.copy_from_slice(s);
    Some(match order {
        ByteOrder::Little => i32::from_le_bytes(a),
        ByteOrder::Big => i32::from_be_bytes(a),
    })
}

/// Parses the header of a TeaFile held in `bytes` (the whole file: its length is the physical
/// file size used for the ItemStart/ItemEnd checks and the item count).
///
/// Refuses (with [`SourceError::Malformed`]) a file that is not a TeaFile or whose header is
/// inconsistent: a bad magic, an ItemStart inside the header or beyond the end of the file, an
/// ItemEnd before ItemStart or beyond the end of the file, sections that run past ItemStart,
/// fields outside the item, time fields that name no field, duplicated sections.
pub fn parse_header(bytes: &[u8]) -> Result<TeaHeader> {
    parse_header_prefix(bytes, bytes.len() as u64)
}

/// ItemStart, from the first 32 bytes of a file of `file_len` bytes (checked as
/// [`parse_header`] checks it): how many leading bytes [`parse_header_prefix`] needs.
pub fn item_start(head: &[u8], file_len: u64) -> Result<u64> {
    mandatory_header(head, file_len).map(|(_, start, _, _)| start)
}

/// [`parse_header`] of a file of `file_len` bytes from its first bytes `head`, which must hold
/// at least the header ([`item_start`] bytes): for a file read by ranges.
pub fn parse_header_prefix(head: &[u8], file_len: u64) -> Result<TeaHeader> {
    let (order, item_start, item_end, section_count) = mandatory_header(head, file_len)?;
    if (head.len() as u64) < item_start {
        return Err(Request::TooFewBytes {
            what: "the header (up to ItemStart)",
            needed: item_start,
            given: head.len() as u64,
        }
        .into());
    }
    let bytes = head;
    let mut header = TeaHeader {
        byte_order: order,
        item_start,
        item_end,
        file_len,
        sections: Vec::with_capacity(section_count),
        item: None,
        time: None,
        content: None,
        name_values: Vec::new(),
        item_count: 0,
        trailing_bytes: 0,
        problems: Vec::new(),
    };
    if let Some(time_raw) = parse_sections(bytes, &mut header, section_count)? {
        header.time = Some(resolve_time(&header, time_raw)?);
    }
    if let Some(item) = &header.item {
        let size = u64::from(item.size);
        let area = header.item_area_len();
        header.item_count = area / size;
        header.trailing_bytes = area % size;
    }
    Ok(header)
}

/// The 32-byte mandatory header, checked against the file: byte order, ItemStart, ItemEnd and
/// the section count.
fn mandatory_header(bytes: &[u8], file_len: u64) -> Result<(ByteOrder, u64, u64, usize)> {
    if file_len < MANDATORY_HEADER_LEN || (bytes.len() as u64) < MANDATORY_HEADER_LEN {
        return Err(malformed(format!(
            "file is {file_len} bytes, shorter than the 32-byte TeaFile header"
        )));
    }
    let order = ByteOrder::detect(bytes).ok_or_else(|| {
        malformed(
            "not a TeaFile: the first 8 bytes are not the magic 0x0d0e0a0402080500 in either byte order",
        )
    })?;
    let item_start_raw = read_i64(bytes, 8, order)?;
    let item_end_raw = read_i64(bytes, 16, order)?;
    let section_count_raw = read_i64(bytes, 24, order)?;

    if item_start_raw < MANDATORY_HEADER_LEN as i64 {
        return Err(malformed(format!(
            "ItemStart {item_start_raw} is inside the header (the mandatory header ends at offset 32)"
        )));
    }
    let item_start = item_start_raw as u64;
    if item_start > file_len {
        return Err(malformed(format!(
            "ItemStart {item_start} points {} bytes beyond end of file (file size {file_len})",
            item_start - file_len
        )));
    }
    if item_end_raw < 0 {
        return Err(malformed(format!("ItemEnd {item_end_raw} is negative")));
    }
    let item_end = item_end_raw as u64;
    if item_end != 0 {
        if item_end < item_start {
            return Err(malformed(format!(
                "ItemEnd {item_end} is before ItemStart {item_start}"
            )));
        }
        if item_end > file_len {
            return Err(malformed(format!(
                "ItemEnd {item_end} points {} bytes beyond end of file (file size {file_len}): the file is truncated",
                item_end - file_len
            )));
        }
    }
    if section_count_raw < 0 {
        return Err(malformed(format!(
            "SectionCount {section_count_raw} is negative"
        )));
    }
    let header_room = item_start - MANDATORY_HEADER_LEN;
    // Every section takes at least 8 bytes (id + next-section offset).
    if (section_count_raw as u64) > header_room / 8 {
        return Err(malformed(format!(
            "SectionCount {section_count_raw} cannot fit in the {header_room} bytes between the header and ItemStart {item_start}"
        )));
    }
    Ok((order, item_start, item_end, section_count_raw as usize))
}

/// The time section as stored: epoch days, ticks per day, time field offsets.
type TimeRaw = (i64, i64, Vec<u32>);

/// Parses the `section_count` sections between the mandatory header and ItemStart into
/// `header`; the time section as stored, when there is one (its fields are resolved once the
/// item section is known).
fn parse_sections(
    bytes: &[u8],
    header: &mut TeaHeader,
    section_count: usize,
) -> Result<Option<TimeRaw>> {
    let (order, item_start) = (header.byte_order, header.item_start);
    // item_start <= file_len <= usize::MAX because `bytes` is in memory.
    let header_end = item_start as usize;
    let mut time_raw = None;
    let mut pos = MANDATORY_HEADER_LEN as usize;
    for i in 0..section_count {
        let number = i + 1;
        let body_start = pos
            .checked_add(8)
            .filter(|&e| e <= header_end)
            .ok_or_else(|| {
                malformed(format!(
                    "section {number} of {section_count} at offset {pos} does not fit before ItemStart {item_start}"
                ))
            })?;
        let id =
            read_i32(bytes, pos, order).ok_or_else(|| malformed("section header truncated"))?;
        let nso =
            read_i32(bytes, pos + 4, order).ok_or_else(|| malformed("section header truncated"))?;
        let last = number == section_count;
        let body_end = if last {
            header_end
        } else {
            let off = usize::try_from(nso).map_err(|_| {
                malformed(format!(
                    "{} (section {number} at offset {pos}) has negative next-section offset {nso}",
                    section_name(id)
                ))
            })?;
            body_start
                .checked_add(off)
                .filter(|&e| e <= header_end)
                .ok_or_else(|| {
                    malformed(format!(
                        "{} (section {number} at offset {pos}) has next-section offset {nso}, pointing beyond ItemStart {item_start}",
                        section_name(id)
                    ))
                })?
        };
        if matches!(
            id,
            SECTION_ITEM | SECTION_TIME | SECTION_CONTENT | SECTION_NAME_VALUE
        ) && header.sections.iter().any(|s| s.id == id)
        {
            return Err(malformed(format!(
                "{} occurs twice (again at offset {pos}); each section may occur only once",
                section_name(id)
            )));
        }
        let mut cur = Cursor {
            buf: &bytes[body_start..body_end],
            pos: 0,
            base: body_start as u64,
            order,
            what: section_name(id),
        };
        match id {
            SECTION_ITEM => header.item = Some(parse_item_section(&mut cur)?),
            SECTION_TIME => time_raw = Some(parse_time_section(&mut cur)?),
            SECTION_CONTENT => header.content = Some(cur.string("content description")?),
            SECTION_NAME_VALUE => parse_name_values(&mut cur, header)?,
            _ => {} // unknown or custom section: skipped by its offset
        }
        header.sections.push(SectionInfo {
            id,
            offset: pos as u64,
            next_section_offset: nso,
            body_len: (body_end - body_start) as u64,
        });
        pos = body_end;
    }
    Ok(time_raw)
}

/// The time section with its time fields found among the item's fields.
fn resolve_time(
    header: &TeaHeader,
    (epoch_days, ticks_per_day, field_offsets): TimeRaw,
) -> Result<TimeInfo> {
    let mut fields: Vec<usize> = Vec::new();
    for &off in &field_offsets {
        let item = header.item.as_ref().ok_or_else(|| {
            malformed(format!(
                "time section names a time field at offset {off}, but the file has no item section"
            ))
        })?;
        let idx = item
            .fields
            .iter()
            .position(|f| f.offset == off)
            .ok_or_else(|| {
                malformed(format!(
                    "time section names a time field at offset {off}, but no field of item '{}' starts there",
                    item.name
                ))
            })?;
        if !fields.contains(&idx) {
            fields.push(idx);
        }
    }
    Ok(TimeInfo {
        epoch_days,
        ticks_per_day,
        field_offsets,
        fields,
    })
}

fn parse_item_section(cur: &mut Cursor<'_>) -> Result<ItemInfo> {
    let at = cur.abs();
    let size = cur.i32("item size")?;
    if size <= 0 {
        return Err(malformed(format!(
            "item section: item size {size} (at offset {at}) must be positive"
        )));
    }
    let size = size as u32;
    let name = cur.string("item name")?;
    let at = cur.abs();
    let field_count = cur.i32("field count")?;
    if field_count < 1 {
        return Err(malformed(format!(
            "item section: field count {field_count} (at offset {at}) must be at least 1"
        )));
    }
    let field_count = field_count as u32;
    // type + offset + name length
    cur.check_fits(field_count, 12, "field count")?;
    let mut fields = Vec::with_capacity(field_count as usize);
    for _ in 0..field_count {
        let field_type = cur.i32("field type")?;
        let offset = cur.count("field offset")?;
        let fname = cur.string("field name")?;
        let tname = field_type_name(field_type);
        if offset >= size {
            return Err(malformed(format!(
                "item section declares field '{fname}' ({tname}) at offset {offset} beyond item size {size}"
            )));
        }
        if let Some(fsize) = field_type_size(field_type) {
            if u64::from(offset) + u64::from(fsize) > u64::from(size) {
                return Err(malformed(format!(
                    "item section declares field '{fname}' ({tname}, {fsize} bytes) at offset {offset}, running past item size {size}"
                )));
            }
        }
        fields.push(FieldInfo {
            name: fname,
            field_type,
            offset,
        });
    }
    Ok(ItemInfo { name, size, fields })
}

fn parse_time_section(cur: &mut Cursor<'_>) -> Result<(i64, i64, Vec<u32>)> {
    let epoch = cur.i64("epoch")?;
    let at = cur.abs();
    let tpd = cur.i64("ticks per day")?;
    if tpd <= 0 {
        return Err(malformed(format!(
            "time section: ticks per day {tpd} (at offset {at}) must be positive"
        )));
    }
    let count = cur.count("time field count")?;
    cur.check_fits(count, 4, "time field count")?;
    let mut offsets = Vec::with_capacity(count as usize);
    for _ in 0..count {
        offsets.push(cur.count("time field offset")?);
    }
    Ok((epoch, tpd, offsets))
}

fn parse_name_values(cur: &mut Cursor<'_>, header: &mut TeaHeader) -> Result<()> {
    let count = cur.count("name/value count")?;
    // name length + kind + the smallest value (int32)
    cur.check_fits(count, 12, "name/value count")?;
    header.name_values.reserve(count as usize);
    for i in 0..count {
        let name = cur.string("name")?;
        let at = cur.abs();
        let kind = cur.i32("kind")?;
        let value = match kind {
            1 => NameValue::Int32(cur.i32("int32 value")?),
            2 => NameValue::Double(cur.f64("double value")?),
            3 => NameValue::Text(cur.string("text value")?),
            4 => NameValue::Uuid(cur.array::<16>("uuid value")?),
            _ => {
                let rest = count - i - 1;
                header.problems.push(HeaderProblem {
                    name: format!("name/value '{name}'"),
                    reason: format!(
                        "unknown name/value kind {kind} (at offset {at}): its value length is unknown, so it and the {rest} pair(s) after it cannot be read"
                    ),
                });
                return Ok(());
            }
        };
        header.name_values.push((name, value));
    }
    Ok(())
}
