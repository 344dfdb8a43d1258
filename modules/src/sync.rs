//! The lock helper the modules' threads share: [`dnsluice_core::sync::lock`].

pub(crate) use dnsluice_core::sync::lock;
