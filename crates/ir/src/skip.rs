//! What serialization leaves out: fields at their default (`false`, `0`).

pub(crate) fn is_false(v: &bool) -> bool {
    !*v
}

pub(crate) fn is_zero(v: &u32) -> bool {
    *v == 0
}
