//! Rebalancing: who consumes which queue. Pure pieces; the consumer sequences them.

mod md5;
mod strategy;

pub use strategy::AllocateStrategy;
