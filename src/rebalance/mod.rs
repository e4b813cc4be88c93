//! Rebalancing: who consumes which queue. Pure pieces; [`consumer`](crate::consumer) sequences them.

mod md5;
mod strategy;

pub use strategy::AllocateStrategy;
