//! Keys looked up in ascending order in a map sorted the same way: one walk
//! over the map, not a search per key. A build asks its map before for every
//! route key of a table, in key order; at 10,000 keys the searches' string
//! comparisons were a sizeable part of a one-route change.

use std::borrow::Borrow;
use std::collections::btree_map;
use std::iter::Peekable;

/// A walk over a map's entries, answering lookups made in ascending key order.
/// Its keys are strings (`String` or a shared `Arc<str>`).
pub(crate) struct InOrder<'a, V, K = String> {
    rest: Option<Peekable<btree_map::Iter<'a, K, V>>>,
}

impl<'a, V, K: Borrow<str>> InOrder<'a, V, K> {
    pub(crate) fn new(map: Option<&'a btree_map::BTreeMap<K, V>>) -> Self {
        InOrder {
            rest: map.map(|m| m.iter().peekable()),
        }
    }

    /// The value of `key`, if the map has it. Each key asked for must be
    /// greater than the one asked for before.
    pub(crate) fn get(&mut self, key: &str) -> Option<&'a V> {
        let rest = self.rest.as_mut()?;
        while rest.next_if(|(k, _)| (*k).borrow() < key).is_some() {}
        rest.next_if(|(k, _)| (*k).borrow() == key).map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn finds_what_a_search_finds_for_keys_in_order() {
        let map: BTreeMap<String, usize> = ["b", "d", "e", "g"]
            .iter()
            .enumerate()
            .map(|(i, k)| (k.to_string(), i))
            .collect();
        let mut walk = InOrder::new(Some(&map));
        for key in ["a", "b", "c", "d", "e", "f", "g", "h"] {
            assert_eq!(walk.get(key), map.get(key), "{key}");
        }
        assert_eq!(InOrder::<usize>::new(None).get("b"), None);
    }
}
