//! `Items<T>`: the array type the Chat Completions and Gemini chunk parsers
//! share.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// A JSON array read like a `Vec`, except that its first element is held
/// inline: the usual one-element array (one choice or candidate, one tool call or part per chunk)
/// costs no allocation of its own, which keeps decoding at one allocation per
/// text delta, the text's.
#[derive(Debug)]
pub(crate) struct Items<T> {
    first: Option<T>,
    rest: Vec<T>,
}

impl<T> Default for Items<T> {
    fn default() -> Self {
        Self {
            first: None,
            rest: Vec::new(),
        }
    }
}

impl<T> IntoIterator for Items<T> {
    type Item = T;
    type IntoIter = std::iter::Chain<std::option::IntoIter<T>, std::vec::IntoIter<T>>;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.rest)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Items<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ItemsVisitor<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for ItemsVisitor<T> {
            type Value = Items<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Items<T>, A::Error> {
                let first = seq.next_element()?;
                let mut rest = Vec::new();
                if first.is_some() {
                    while let Some(item) = seq.next_element()? {
                        rest.push(item);
                    }
                }
                Ok(Items { first, rest })
            }
        }

        deserializer.deserialize_seq(ItemsVisitor(PhantomData))
    }
}
