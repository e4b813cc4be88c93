//! GET_CONSUMER_RUNNING_INFO answer (`ConsumerRunningInfo`, PROTOCOL.md §6.11).

use std::collections::BTreeMap;

use super::{BodyError, JsonBody, Obj, SubscriptionData, mq_from_key, write_mq_map};
use crate::json::{JsonWriter, Value};
use crate::message::MessageQueue;

/// Per-queue state (`ProcessQueueInfo.java`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessQueueInfo {
    /// Offset the consumer would commit now.
    pub commit_offset: i64,
    /// Lowest cached offset.
    pub cached_msg_min_offset: i64,
    /// Highest cached offset.
    pub cached_msg_max_offset: i64,
    /// Cached messages.
    pub cached_msg_count: i32,
    /// Cached body size, MiB.
    pub cached_msg_size_in_mib: i32,
    /// Orderly: lowest offset taken but not committed.
    pub transaction_msg_min_offset: i64,
    /// Orderly: highest offset taken but not committed.
    pub transaction_msg_max_offset: i64,
    /// Orderly: messages taken but not committed.
    pub transaction_msg_count: i32,
    /// Orderly: broker lock held.
    pub locked: bool,
    /// Failed unlock attempts.
    pub try_unlock_times: i64,
    /// Last lock, ms since the epoch.
    pub last_lock_timestamp: i64,
    /// Dropped (key spelled `droped` in Java).
    pub dropped: bool,
    /// Last pull, ms since the epoch.
    pub last_pull_timestamp: i64,
    /// Last consume, ms since the epoch.
    pub last_consume_timestamp: i64,
}

/// Per-topic statistics (Java's body class `ConsumeStatus`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConsumeStats {
    /// Pull round trip, ms.
    pub pull_rt: f64,
    /// Pulled messages per second.
    pub pull_tps: f64,
    /// Consume time, ms.
    pub consume_rt: f64,
    /// Successes per second.
    pub consume_ok_tps: f64,
    /// Failures per second.
    pub consume_failed_tps: f64,
    /// Failures in the last hour.
    pub consume_failed_msgs: i64,
}

/// The answer body.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConsumerRunningInfo {
    /// Settings and facts (`PROP_*` keys and the consumer's knobs).
    pub properties: BTreeMap<String, String>,
    /// Subscriptions.
    pub subscription_set: Vec<SubscriptionData>,
    /// Queue → state.
    pub mq_table: Vec<(MessageQueue, ProcessQueueInfo)>,
    /// Topic → statistics.
    pub status_table: BTreeMap<String, ConsumeStats>,
    /// A thread dump in Java; unused here.
    pub jstack: Option<String>,
}

impl ProcessQueueInfo {
    fn write_json(&self, w: &mut JsonWriter) {
        w.begin_object()
            .field_int("cachedMsgCount", self.cached_msg_count.into())
            .field_int("cachedMsgMaxOffset", self.cached_msg_max_offset)
            .field_int("cachedMsgMinOffset", self.cached_msg_min_offset)
            .field_int("cachedMsgSizeInMiB", self.cached_msg_size_in_mib.into())
            .field_int("commitOffset", self.commit_offset)
            .field_bool("droped", self.dropped)
            .field_int("lastConsumeTimestamp", self.last_consume_timestamp)
            .field_int("lastLockTimestamp", self.last_lock_timestamp)
            .field_int("lastPullTimestamp", self.last_pull_timestamp)
            .field_bool("locked", self.locked)
            .field_int("transactionMsgCount", self.transaction_msg_count.into())
            .field_int("transactionMsgMaxOffset", self.transaction_msg_max_offset)
            .field_int("transactionMsgMinOffset", self.transaction_msg_min_offset)
            .field_int("tryUnlockTimes", self.try_unlock_times)
            .end_object();
    }

    fn from_value(v: &Value) -> Result<Self, BodyError> {
        let o = Obj::new(v, "ProcessQueueInfo")?;
        Ok(Self {
            commit_offset: o.opt_i64("commitOffset")?.unwrap_or(0),
            cached_msg_min_offset: o.opt_i64("cachedMsgMinOffset")?.unwrap_or(0),
            cached_msg_max_offset: o.opt_i64("cachedMsgMaxOffset")?.unwrap_or(0),
            cached_msg_count: o.i32_or("cachedMsgCount", 0)?,
            cached_msg_size_in_mib: o.i32_or("cachedMsgSizeInMiB", 0)?,
            transaction_msg_min_offset: o.opt_i64("transactionMsgMinOffset")?.unwrap_or(0),
            transaction_msg_max_offset: o.opt_i64("transactionMsgMaxOffset")?.unwrap_or(0),
            transaction_msg_count: o.i32_or("transactionMsgCount", 0)?,
            locked: o.bool_or("locked", false)?,
            try_unlock_times: o.opt_i64("tryUnlockTimes")?.unwrap_or(0),
            last_lock_timestamp: o.opt_i64("lastLockTimestamp")?.unwrap_or(0),
            dropped: o.bool_or("droped", false)?,
            last_pull_timestamp: o.opt_i64("lastPullTimestamp")?.unwrap_or(0),
            last_consume_timestamp: o.opt_i64("lastConsumeTimestamp")?.unwrap_or(0),
        })
    }
}

impl JsonBody for ConsumerRunningInfo {
    const NAME: &'static str = "ConsumerRunningInfo";

    fn from_value(v: &Value) -> Result<Self, BodyError> {
        let o = Obj::new(v, Self::NAME)?;
        let mut properties = BTreeMap::new();
        for (k, val) in o.object("properties")? {
            let k = k.as_str().map(str::to_owned).unwrap_or_else(|| k.to_string());
            let val = val.as_str().map(str::to_owned).unwrap_or_else(|| val.to_string());
            properties.insert(k, val);
        }
        let subscription_set =
            o.array("subscriptionSet")?.iter().map(SubscriptionData::from_value).collect::<Result<_, _>>()?;
        let mut mq_table = Vec::new();
        for (k, val) in o.object("mqTable")? {
            mq_table.push((mq_from_key(k, Self::NAME)?, ProcessQueueInfo::from_value(val)?));
        }
        let mut status_table = BTreeMap::new();
        for (k, val) in o.object("statusTable")? {
            let s = Obj::new(val, "ConsumeStatus")?;
            status_table.insert(
                k.as_str().unwrap_or_default().to_owned(),
                ConsumeStats {
                    pull_rt: s.f64_or("pullRT", 0.0)?,
                    pull_tps: s.f64_or("pullTPS", 0.0)?,
                    consume_rt: s.f64_or("consumeRT", 0.0)?,
                    consume_ok_tps: s.f64_or("consumeOKTPS", 0.0)?,
                    consume_failed_tps: s.f64_or("consumeFailedTPS", 0.0)?,
                    consume_failed_msgs: s.opt_i64("consumeFailedMsgs")?.unwrap_or(0),
                },
            );
        }
        Ok(Self { properties, subscription_set, mq_table, status_table, jstack: o.opt_str("jstack")? })
    }

    fn write_json(&self, w: &mut JsonWriter) {
        w.begin_object().field_opt_str("jstack", self.jstack.as_deref()).key("mqTable");
        write_mq_map(w, &self.mq_table, |w, info| info.write_json(w));
        w.key("properties").begin_object();
        for (k, v) in &self.properties {
            w.field_str(k, v);
        }
        w.end_object().key("statusTable").begin_object();
        for (topic, s) in &self.status_table {
            w.key(topic)
                .begin_object()
                .key("consumeFailedMsgs")
                .int(s.consume_failed_msgs)
                .key("consumeFailedTPS")
                .float(s.consume_failed_tps)
                .key("consumeOKTPS")
                .float(s.consume_ok_tps)
                .key("consumeRT")
                .float(s.consume_rt)
                .key("pullRT")
                .float(s.pull_rt)
                .key("pullTPS")
                .float(s.pull_tps)
                .end_object();
        }
        w.end_object().key("subscriptionSet").begin_array();
        for s in &self.subscription_set {
            s.write_json(w);
        }
        w.end_array().end_object();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ExpressionType;

    #[test]
    fn round_trip() {
        let mut info = ConsumerRunningInfo::default();
        info.properties.insert("PROP_CONSUME_TYPE".into(), "CONSUME_PASSIVELY".into());
        info.subscription_set.push(SubscriptionData::build("T", "a||b", ExpressionType::Tag, 1));
        info.mq_table.push((
            MessageQueue::new("T", "b", 1),
            ProcessQueueInfo { commit_offset: 9, cached_msg_count: 2, locked: true, ..Default::default() },
        ));
        info.status_table
            .insert("T".into(), ConsumeStats { pull_tps: 1.5, consume_failed_msgs: 2, ..Default::default() });
        let bytes = info.encode();
        let text = std::str::from_utf8(&bytes).unwrap();
        assert!(text.contains(r#""mqTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"#), "{text}");
        assert_eq!(ConsumerRunningInfo::decode(&bytes).unwrap(), info);
    }
}
