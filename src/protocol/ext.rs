//! Ext fields (`extFields`) and typed command headers.
//!
//! Java flattens each `CommandCustomHeader` into a string map: key = Java field name, value =
//! `toString()`. The crate-private `command_header!` macro declares a Rust struct together with those keys, so every header
//! in [`header`](super::header) is one declaration and one mapping.

use std::borrow::Cow;

/// The `extFields` string map, in insertion order (the order we send; Java sends HashMap order).
///
/// A handful of entries per frame, so a vector with linear lookup beats a hash map.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExtFields {
    // Keys a typed header writes are its static field names: borrowed, not allocated per frame.
    entries: Vec<(Cow<'static, str>, String)>,
}

impl ExtFields {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty map with room for `n` entries.
    pub fn with_capacity(n: usize) -> Self {
        Self { entries: Vec::with_capacity(n) }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Set `key`, replacing an earlier value (a decoded duplicate key: the last one wins, as in Java).
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.set(Cow::Owned(key.into()), value.into());
    }

    /// [`insert`](Self::insert) for a key known at compile time (a header's field name).
    pub(crate) fn insert_static(&mut self, key: &'static str, value: String) {
        self.set(Cow::Borrowed(key), value);
    }

    fn set(&mut self, key: Cow<'static, str>, value: String) {
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.entries.push((key, value)),
        }
    }

    /// Room for `n` more entries.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.entries.reserve(n);
    }

    /// Remove `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(i).1)
    }

    /// Entries in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.entries.iter().map(|(k, v)| (k.as_ref(), v.as_str()))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut ext = Self::new();
        for (k, v) in iter {
            ext.insert(k, v);
        }
        ext
    }
}

/// A typed header that could not be read from ext fields.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// A required (`@CFNotNull`) field is absent.
    #[error("{header}: required field `{field}` is missing")]
    Missing {
        /// Header type name.
        header: &'static str,
        /// Java field name.
        field: &'static str,
    },
    /// A field is present but does not parse.
    #[error("{header}: field `{field}` = {value:?} is not {expected}")]
    Invalid {
        /// Header type name.
        header: &'static str,
        /// Java field name.
        field: &'static str,
        /// The offending value (truncated to 64 characters).
        value: String,
        /// What was expected.
        expected: &'static str,
    },
}

/// A typed custom header: `CommandCustomHeader` in Java.
pub trait CommandHeader: Sized {
    /// The Rust type name, used in errors.
    const NAME: &'static str;
    /// Write every non-empty field into `ext`.
    fn write_to(&self, ext: &mut ExtFields);
    /// Read the fields back; missing required fields and unparsable values are errors.
    fn read_from(ext: &ExtFields) -> Result<Self, HeaderError>;
}

/// A value that travels as one ext-field string.
pub trait ExtValue: Sized {
    /// What a valid value looks like, for errors.
    const EXPECTED: &'static str;
    /// Parse the Java `toString()` form.
    fn parse_ext(s: &str) -> Option<Self>;
    /// Append the Java `toString()` form.
    fn format_ext(&self, out: &mut String);
}

impl ExtValue for String {
    const EXPECTED: &'static str = "a string";
    fn parse_ext(s: &str) -> Option<Self> {
        Some(s.to_owned())
    }
    fn format_ext(&self, out: &mut String) {
        out.push_str(self);
    }
}

macro_rules! int_ext {
    ($($t:ty => $e:literal),*) => {$(
        impl ExtValue for $t {
            const EXPECTED: &'static str = $e;
            fn parse_ext(s: &str) -> Option<Self> {
                // Java's Integer/Long.parseLong accept a leading '+'; Rust's parse does too.
                s.trim().parse().ok()
            }
            fn format_ext(&self, out: &mut String) {
                crate::json::push_int(out, (*self).into());
            }
        }
    )*};
}
int_ext!(i32 => "a 32-bit integer", i64 => "a 64-bit integer");

impl ExtValue for bool {
    const EXPECTED: &'static str = "a boolean";
    /// `Boolean.parseBoolean`: only a case-insensitive "true" is true; anything else is false.
    fn parse_ext(s: &str) -> Option<Self> {
        Some(s.eq_ignore_ascii_case("true"))
    }
    fn format_ext(&self, out: &mut String) {
        out.push_str(if *self { "true" } else { "false" });
    }
}

/// How a header field maps onto ext fields: required (`T`) or optional (`Option<T>`).
pub trait HeaderField: Sized {
    /// Write the field if present.
    fn put(&self, key: &'static str, ext: &mut ExtFields);
    /// Read the field.
    fn take(ext: &ExtFields, header: &'static str, key: &'static str) -> Result<Self, HeaderError>;
}

fn format_value<T: ExtValue>(value: &T) -> String {
    let mut s = String::new();
    value.format_ext(&mut s);
    s
}

fn parse_value<T: ExtValue>(raw: &str, header: &'static str, key: &'static str) -> Result<T, HeaderError> {
    T::parse_ext(raw).ok_or_else(|| HeaderError::Invalid {
        header,
        field: key,
        value: raw.chars().take(64).collect(),
        expected: T::EXPECTED,
    })
}

impl<T: ExtValue> HeaderField for T {
    fn put(&self, key: &'static str, ext: &mut ExtFields) {
        ext.insert_static(key, format_value(self));
    }
    fn take(ext: &ExtFields, header: &'static str, key: &'static str) -> Result<Self, HeaderError> {
        match ext.get(key) {
            Some(raw) => parse_value(raw, header, key),
            None => Err(HeaderError::Missing { header, field: key }),
        }
    }
}

impl<T: ExtValue> HeaderField for Option<T> {
    fn put(&self, key: &'static str, ext: &mut ExtFields) {
        if let Some(v) = self {
            ext.insert_static(key, format_value(v));
        }
    }
    fn take(ext: &ExtFields, header: &'static str, key: &'static str) -> Result<Self, HeaderError> {
        // An empty value is what a 4.9.4+ binary header decodes to `null`: treat it as absent.
        match ext.get(key) {
            Some(raw) if !raw.is_empty() => parse_value(raw, header, key).map(Some),
            _ => Ok(None),
        }
    }
}

/// Declare a typed header: a struct whose fields map to Java ext-field keys.
///
/// `T` fields are required (`@CFNotNull` or Java primitives); `Option<T>` fields are optional.
macro_rules! command_header {
    ($(#[$meta:meta])* pub struct $name:ident {
        $($(#[$fmeta:meta])* $field:ident : $ty:ty = $key:literal,)*
    }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl $crate::protocol::ext::CommandHeader for $name {
            const NAME: &'static str = stringify!($name);
            fn write_to(&self, ext: &mut $crate::protocol::ext::ExtFields) {
                ext.reserve(<[&str]>::len(&[$($key),*]));
                $($crate::protocol::ext::HeaderField::put(&self.$field, $key, ext);)*
            }
            #[allow(unused_variables)]
            fn read_from(
                ext: &$crate::protocol::ext::ExtFields,
            ) -> Result<Self, $crate::protocol::ext::HeaderError> {
                Ok(Self {
                    $($field: $crate::protocol::ext::HeaderField::take(ext, Self::NAME, $key)?,)*
                })
            }
        }
    };
}
pub(crate) use command_header;

/// Declare a fieldless enum that travels by its Java name (parsed case-insensitively).
macro_rules! name_enum {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$vmeta:meta])* $variant:ident = $java:literal,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl $name {
            /// The Java enum name.
            pub fn java_name(self) -> &'static str {
                match self {
                    $(Self::$variant => $java,)*
                }
            }

            /// Parse a Java enum name, case-insensitively (fastjson's rule).
            pub fn from_java_name(s: &str) -> Option<Self> {
                $(if s.eq_ignore_ascii_case($java) { return Some(Self::$variant); })*
                None
            }
        }

        impl $crate::protocol::ext::ExtValue for $name {
            const EXPECTED: &'static str = concat!("one of", $(" ", $java,)*);
            fn parse_ext(s: &str) -> Option<Self> {
                Self::from_java_name(s.trim())
            }
            fn format_ext(&self, out: &mut String) {
                out.push_str(self.java_name());
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.java_name())
            }
        }
    };
}
pub(crate) use name_enum;

#[cfg(test)]
#[allow(unreachable_pub)]
mod tests {
    use super::*;

    command_header! {
        /// Test header.
        pub struct Demo {
            /// required
            name: String = "name",
            /// required int
            n: i32 = "n",
            /// optional
            big: Option<i64> = "big",
            /// bool
            flag: bool = "flag",
        }
    }

    #[test]
    fn header_round_trip_and_errors() {
        let d = Demo { name: "x".into(), n: -3, big: Some(1 << 40), flag: true };
        let mut ext = ExtFields::new();
        d.write_to(&mut ext);
        assert_eq!(ext.get("n"), Some("-3"));
        assert_eq!(ext.get("flag"), Some("true"));
        assert_eq!(Demo::read_from(&ext).unwrap(), d);

        ext.remove("big");
        assert_eq!(Demo::read_from(&ext).unwrap().big, None);
        ext.insert("big", "");
        assert_eq!(Demo::read_from(&ext).unwrap().big, None, "empty optional = null");

        ext.insert("n", "x1");
        let err = Demo::read_from(&ext).unwrap_err();
        assert!(matches!(err, HeaderError::Invalid { field: "n", .. }), "{err}");
        assert!(err.to_string().contains("Demo: field `n`"));

        ext.remove("name");
        assert_eq!(
            Demo::read_from(&ext).unwrap_err(),
            HeaderError::Missing { header: "Demo", field: "name" }
        );
    }

    #[test]
    fn java_boolean_parse() {
        assert_eq!(bool::parse_ext("TRUE"), Some(true));
        assert_eq!(bool::parse_ext("yes"), Some(false));
    }

    #[test]
    fn insert_replaces() {
        let mut ext: ExtFields = [("a", "1"), ("b", "2"), ("a", "3")].into_iter().collect();
        assert_eq!(ext.len(), 2);
        assert_eq!(ext.get("a"), Some("3"));
        ext.insert("b", "4");
        assert_eq!(ext.iter().collect::<Vec<_>>(), [("a", "3"), ("b", "4")]);
    }
}
