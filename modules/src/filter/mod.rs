//! Filters: stages between an input and an output.

pub mod dns;
pub mod layer;
pub mod select;
pub mod split;
pub mod timing;
pub mod top;
