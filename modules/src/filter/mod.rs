//! Filters: stages between an input and an output.

pub mod layer;
