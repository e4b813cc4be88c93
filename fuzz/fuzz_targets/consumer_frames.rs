#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| rocketmq_push_core::fuzzing::consumer_frames(data));
