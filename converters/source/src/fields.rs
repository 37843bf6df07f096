//! How a field of an HDF5 or netCDF-4 compound type is named as a variable of its own
//! (`<variable>/<field>`): one rule for both importers, since netCDF-4 compounds are HDF5
//! compounds.

/// The variable-name part for compound field `index` named `name`: `field_<index>` when it has
/// no name, `/` (which separates groups) replaced by `_`; each change noted in `notes`.
pub fn compound_field_name(name: &str, index: usize, notes: &mut Vec<String>) -> String {
    if name.is_empty() {
        notes.push(format!(
            "compound field {index} has no name: named field_{index}"
        ));
        return format!("field_{index}");
    }
    if name.contains('/') {
        let s = name.replace('/', "_");
        notes.push(format!(
            "compound field '{name}' renamed '{s}' ('/' separates groups)"
        ));
        return s;
    }
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let mut notes = Vec::new();
        assert_eq!(compound_field_name("x", 0, &mut notes), "x");
        assert!(notes.is_empty());
        assert_eq!(compound_field_name("", 3, &mut notes), "field_3");
        assert_eq!(compound_field_name("a/b", 1, &mut notes), "a_b");
        assert_eq!(notes.len(), 2);
    }
}
