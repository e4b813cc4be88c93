//! Knobs by their Java names, from text: what a command line (`-X pullBatchSize=64`) or a
//! config file holds. Values are in Java's units (milliseconds, consumeTimeout in minutes,
//! thresholds in MiB, −1 for "off"); ranges are checked by [`ConsumerConfigBuilder::build`].

use std::time::Duration;

use super::{ConfigError, ConsumerConfigBuilder};
use crate::protocol::body::{ConsumeFromWhere, MessageModel};
use crate::rebalance::AllocateStrategy;

/// The Java names [`ConsumerConfigBuilder::set`] takes, for help texts and errors.
pub const JAVA_KNOBS: &[&str] = &[
    "messageModel",
    "consumeFromWhere",
    "allocateMessageQueueStrategy",
    "consumeThreadMin",
    "consumeThreadMax",
    "consumeConcurrentlyMaxSpan",
    "pullThresholdForQueue",
    "pullThresholdSizeForQueue",
    "pullThresholdForTopic",
    "pullThresholdSizeForTopic",
    "pullInterval",
    "pullBatchSize",
    "pullBatchSizeInBytes",
    "clientRebalance",
    "popThresholdForQueue",
    "popInvisibleTime",
    "popBatchNums",
    "consumeMessageBatchMaxSize",
    "postSubscriptionWhenPull",
    "unitMode",
    "maxReconsumeTimes",
    "suspendCurrentQueueTimeMillis",
    "consumeTimeout",
    "awaitTerminationMillisWhenShutdown",
    "pollNameServerInterval",
    "heartbeatBrokerInterval",
    "persistConsumerOffsetInterval",
    "pullTimeDelayMillsWhenException",
    "mqClientApiTimeout",
    "namespace",
];

impl ConsumerConfigBuilder {
    /// Set the knob Java calls `knob` (a [`JAVA_KNOBS`] name) from text, in Java's units:
    /// `set("pullBatchSize", "64")`, `set("consumeTimeout", "5")` (minutes),
    /// `set("pullThresholdForTopic", "-1")` (off). An unknown name or a value of the wrong
    /// kind is a [`ConfigError`] naming it; a value out of range is one from `build()`.
    pub fn set(self, knob: &str, value: &str) -> Result<Self, ConfigError> {
        let v = value.trim();
        let Some(&k) = JAVA_KNOBS.iter().find(|n| **n == knob) else {
            return Err(ConfigError {
                knob: "knob name",
                value: knob.to_owned(),
                allowed: "a DefaultMQPushConsumer field name, e.g. pullBatchSize (JAVA_KNOBS lists them)",
            });
        };
        let bad = |allowed: &'static str| ConfigError { knob: k, value: v.to_owned(), allowed };
        let int = || v.parse::<i64>().map_err(|_| bad("an integer"));
        let count = || v.parse::<usize>().map_err(|_| bad("a non-negative integer"));
        let i32_ = || v.parse::<i32>().map_err(|_| bad("a 32-bit integer"));
        let ms = || v.parse::<u64>().map(Duration::from_millis).map_err(|_| bad("milliseconds, >= 0"));
        let flag = || v.parse::<bool>().map_err(|_| bad("true or false"));
        // -1 is Java's "off" for the per-topic thresholds.
        let off_or_count = || match int()? {
            -1 => Ok(None),
            n => usize::try_from(n).map(Some).map_err(|_| bad("-1 (off) or a non-negative integer")),
        };
        Ok(match k {
            "messageModel" => self.message_model(
                MessageModel::from_java_name(v).ok_or_else(|| bad("CLUSTERING or BROADCASTING"))?,
            ),
            "consumeFromWhere" => {
                self.consume_from_where(ConsumeFromWhere::from_java_name(v).ok_or_else(|| {
                    bad("CONSUME_FROM_LAST_OFFSET, CONSUME_FROM_FIRST_OFFSET or CONSUME_FROM_TIMESTAMP")
                })?)
            }
            "allocateMessageQueueStrategy" => self.allocate_strategy(strategy(v).ok_or_else(|| {
                bad("AVG, AVG_BY_CIRCLE or CONSISTENT_HASH (or Java's class names for them)")
            })?),
            "consumeThreadMin" => self.consume_thread_min(count()?),
            "consumeThreadMax" => self.consume_thread_max(count()?),
            "consumeConcurrentlyMaxSpan" => self.consume_concurrently_max_span(int()?),
            "pullThresholdForQueue" => self.pull_threshold_for_queue(count()?),
            "pullThresholdSizeForQueue" => self.pull_threshold_size_for_queue_mib(count()?),
            "pullThresholdForTopic" => self.pull_threshold_for_topic(off_or_count()?),
            "pullThresholdSizeForTopic" => self.pull_threshold_size_for_topic_mib(off_or_count()?),
            "pullInterval" => self.pull_interval(ms()?),
            "pullBatchSize" => self.pull_batch_size(i32_()?),
            "pullBatchSizeInBytes" => self.pull_batch_size_in_bytes(i32_()?),
            "clientRebalance" => self.client_rebalance(flag()?),
            "popThresholdForQueue" => self.pop_threshold_for_queue(count()?),
            "popInvisibleTime" => self.pop_invisible_time(ms()?),
            "popBatchNums" => self.pop_batch_nums(i32_()?),
            "consumeMessageBatchMaxSize" => self.consume_message_batch_max_size(count()?),
            "postSubscriptionWhenPull" => self.post_subscription_when_pull(flag()?),
            "unitMode" => self.unit_mode(flag()?),
            "maxReconsumeTimes" => self.max_reconsume_times(i32_()?),
            "suspendCurrentQueueTimeMillis" => self.suspend_current_queue_time(ms()?),
            "consumeTimeout" => {
                let minutes = v
                    .parse::<u64>()
                    .ok()
                    .filter(|m| *m <= u64::MAX / 60)
                    .ok_or_else(|| bad("minutes, >= 1"))?;
                self.consume_timeout(Duration::from_secs(minutes * 60))
            }
            "awaitTerminationMillisWhenShutdown" => self.await_termination_when_shutdown(ms()?),
            "pollNameServerInterval" => self.poll_name_server_interval(ms()?),
            "heartbeatBrokerInterval" => self.heartbeat_broker_interval(ms()?),
            "persistConsumerOffsetInterval" => self.persist_consumer_offset_interval(ms()?),
            "pullTimeDelayMillsWhenException" => self.pull_time_delay_when_exception(ms()?),
            "mqClientApiTimeout" => self.mq_client_api_timeout(ms()?),
            "namespace" => self.namespace(v),
            _ => unreachable!("every JAVA_KNOBS name has an arm"),
        })
    }
}

/// `allocateMessageQueueStrategy`: the names Java's `getName()` gives, or the class names.
fn strategy(v: &str) -> Option<AllocateStrategy> {
    Some(match v {
        "AVG" | "AllocateMessageQueueAveragely" => AllocateStrategy::Averagely,
        "AVG_BY_CIRCLE" | "AllocateMessageQueueAveragelyByCircle" => AllocateStrategy::AveragelyByCircle,
        "CONSISTENT_HASH" | "AllocateMessageQueueConsistentHash" => AllocateStrategy::ConsistentHash(10),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ConsumerConfig;

    fn set(pairs: &[(&str, &str)]) -> Result<ConsumerConfig, ConfigError> {
        let mut b = ConsumerConfig::builder("G").name_server("127.0.0.1:9876").subscribe("T", "*");
        for (k, v) in pairs {
            b = b.set(k, v)?;
        }
        b.build()
    }

    #[test]
    fn every_java_knob_is_settable_by_name() {
        // A valid value for each knob, in Java's units; each must be accepted.
        let valid = |k: &str| match k {
            "messageModel" => "BROADCASTING",
            "consumeFromWhere" => "CONSUME_FROM_FIRST_OFFSET",
            "allocateMessageQueueStrategy" => "AVG_BY_CIRCLE",
            "postSubscriptionWhenPull" | "unitMode" | "clientRebalance" => "true",
            "popInvisibleTime" => "10000",
            "popBatchNums" => "16",
            "pullThresholdForTopic" | "pullThresholdSizeForTopic" => "-1",
            "namespace" => "ns1",
            "consumeThreadMin" => "8",
            "consumeThreadMax" => "40",
            _ => "1000",
        };
        for k in JAVA_KNOBS {
            set(&[(k, valid(k))]).unwrap_or_else(|e| panic!("{k}: {e}"));
        }
        let c = set(&[
            ("pullBatchSize", "64"),
            ("consumeTimeout", "5"),
            ("pullInterval", "250"),
            ("messageModel", "BROADCASTING"),
            ("pullThresholdForTopic", "5000"),
            ("consumeThreadMin", " 4 "),
        ])
        .unwrap();
        assert_eq!(c.consume_timeout(), Duration::from_secs(300), "minutes, as Java");
        assert_eq!(c.message_model(), MessageModel::Broadcasting);
        assert_eq!(c.consume_thread_min(), 4);
        assert_eq!((c.pull_batch_size, c.pull_interval), (64, Duration::from_millis(250)));
        assert_eq!(c.pull_threshold_for_topic, Some(5000));
    }

    #[test]
    fn unknown_names_and_bad_values_are_errors_naming_them() {
        let e = set(&[("pullBatchSise", "64")]).unwrap_err();
        assert!(e.to_string().contains("pullBatchSise"), "{e}");
        for (k, v) in [
            ("pullBatchSize", "many"),
            ("consumeThreadMin", "-1"),
            ("messageModel", "clustering!"),
            ("unitMode", "yes"),
            ("pullInterval", "-5"),
            ("consumeTimeout", "99999999999999999999"),
            ("pullThresholdForTopic", "-2"),
            ("allocateMessageQueueStrategy", "RANDOM"),
        ] {
            let e = set(&[(k, v)]).unwrap_err();
            assert_eq!(e.knob, k, "{k}={v}: {e}");
        }
        // Out of range: build() says so, by the same name; no duration may overflow a deadline.
        assert_eq!(set(&[("pullBatchSize", "0")]).unwrap_err().knob, "pullBatchSize");
        for k in
            JAVA_KNOBS.iter().filter(|k| k.contains("Interval") || k.contains("Time") || k.contains("Millis"))
        {
            if ["maxReconsumeTimes", "suspendCurrentQueueTimeMillis"].contains(k) {
                continue;
            }
            let e = set(&[(k, "200000000000000000")]).unwrap_err();
            assert_eq!(e.knob, *k, "{k}: {e}");
        }
    }
}
