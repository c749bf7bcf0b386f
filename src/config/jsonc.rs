//! What the configuration's parsers share about the JSONC syntax tree: a property's name.

use jsonc_parser::ast::ObjectPropName;

/// A property's name, quoted or not.
pub fn name_of(n: &ObjectPropName) -> String {
    match n {
        ObjectPropName::String(s) => s.value.to_string(),
        ObjectPropName::Word(w) => w.value.to_owned(),
    }
}
