//! `HeartbeatData` and the subscription types it carries (PROTOCOL.md §6.2).

use super::{BodyError, JsonBody, Obj};
use crate::json::{JsonWriter, Value};
use crate::message::java_string_hash;
use crate::protocol::ExpressionType;
use crate::protocol::ext::name_enum;

name_enum! {
    /// Where a queue with no committed offset starts (`ConsumeFromWhere.java`). The three
    /// deprecated values behave exactly like LAST.
    #[derive(Default)]
    pub enum ConsumeFromWhere {
        /// The broker's max offset (0 for `%RETRY%` topics).
        #[default]
        ConsumeFromLastOffset = "CONSUME_FROM_LAST_OFFSET",
        /// Deprecated alias of LAST.
        ConsumeFromLastOffsetAndFromMinWhenBootFirst = "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
        /// Deprecated alias of LAST.
        ConsumeFromMinOffset = "CONSUME_FROM_MIN_OFFSET",
        /// Deprecated alias of LAST.
        ConsumeFromMaxOffset = "CONSUME_FROM_MAX_OFFSET",
        /// Offset 0 (corrected by OFFSET_MOVED if below the minimum).
        ConsumeFromFirstOffset = "CONSUME_FROM_FIRST_OFFSET",
        /// The offset of the first message stored at or after `consumeTimestamp`.
        ConsumeFromTimestamp = "CONSUME_FROM_TIMESTAMP",
    }
}

name_enum! {
    /// How queues are shared (`MessageModel.java`).
    #[derive(Default)]
    pub enum MessageModel {
        /// Each queue is consumed by one member of the group; offsets on the broker.
        #[default]
        Clustering = "CLUSTERING",
        /// Every member consumes every queue; offsets kept locally.
        Broadcasting = "BROADCASTING",
    }
}

name_enum! {
    /// Consumer kind (`ConsumeType.java`). Send the name: `"PUSH"` parses to null in fastjson.
    pub enum ConsumeType {
        /// Pull consumer.
        ConsumeActively = "CONSUME_ACTIVELY",
        /// Push consumer.
        ConsumePassively = "CONSUME_PASSIVELY",
        /// 5.x pop.
        ConsumePop = "CONSUME_POP",
    }
}

/// One subscription (`SubscriptionData.java`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriptionData {
    /// Topic.
    pub topic: String,
    /// The expression; `*` for everything.
    pub sub_string: String,
    /// Tags, for TAG expressions other than `*`.
    pub tags_set: Vec<String>,
    /// Java `hashCode()` of each tag: what the broker filters with.
    pub code_set: Vec<i32>,
    /// Version; the pull must not carry a newer one than the broker last heard.
    pub sub_version: i64,
    /// TAG or SQL92.
    pub expression_type: ExpressionType,
    /// Obsolete class filter.
    pub class_filter_mode: bool,
}

impl SubscriptionData {
    /// Build as `FilterAPI.buildSubscriptionData` does: a TAG expression is split on `||`, each
    /// piece trimmed, empty pieces dropped; empty or `*` means all. SQL92 is passed through.
    pub fn build(topic: &str, expression: &str, ty: ExpressionType, sub_version: i64) -> Self {
        let mut s = Self {
            topic: topic.to_owned(),
            sub_string: expression.trim().to_owned(),
            tags_set: Vec::new(),
            code_set: Vec::new(),
            sub_version,
            expression_type: ty,
            class_filter_mode: false,
        };
        if ty == ExpressionType::Tag {
            if s.sub_string.is_empty() || s.sub_string == "*" {
                s.sub_string = "*".to_owned();
            } else {
                for tag in s.sub_string.split("||").map(str::trim).filter(|t| !t.is_empty()) {
                    if !s.tags_set.iter().any(|t| t == tag) {
                        s.tags_set.push(tag.to_owned());
                        s.code_set.push(java_string_hash(tag));
                    }
                }
            }
        }
        s
    }

    /// The client-side re-filter (`PullAPIWrapper.processPullResult`): with a tag set, keep only
    /// messages whose `TAGS` equals one of the tags exactly; without one, keep everything.
    pub fn matches_tag(&self, tag: Option<&str>) -> bool {
        if self.tags_set.is_empty() || self.class_filter_mode || self.expression_type != ExpressionType::Tag {
            return true;
        }
        tag.is_some_and(|t| self.tags_set.iter().any(|s| s == t))
    }

    pub(crate) fn from_value(v: &Value) -> Result<Self, BodyError> {
        let o = Obj::new(v, "SubscriptionData")?;
        let tags_set = o
            .array("tagsSet")?
            .iter()
            .map(|t| t.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or(BodyError::Field {
                body: "SubscriptionData",
                field: "tagsSet",
                what: "holds a non-string",
            })?;
        let code_set = o
            .array("codeSet")?
            .iter()
            .map(|c| c.as_i64().and_then(|c| i32::try_from(c).ok()))
            .collect::<Option<Vec<_>>>()
            .ok_or(BodyError::Field {
                body: "SubscriptionData",
                field: "codeSet",
                what: "holds a non-int",
            })?;
        Ok(Self {
            topic: o.str("topic")?,
            sub_string: o.opt_str("subString")?.unwrap_or_default(),
            tags_set,
            code_set,
            sub_version: o.opt_i64("subVersion")?.unwrap_or(0),
            expression_type: o.enum_or(
                "expressionType",
                ExpressionType::from_java_name,
                ExpressionType::Tag,
            )?,
            class_filter_mode: o.bool_or("classFilterMode", false)?,
        })
    }

    pub(crate) fn write_json(&self, w: &mut JsonWriter) {
        w.begin_object().field_bool("classFilterMode", self.class_filter_mode).key("codeSet").begin_array();
        for c in &self.code_set {
            w.int((*c).into());
        }
        w.end_array()
            .field_str("expressionType", self.expression_type.java_name())
            .field_str("subString", &self.sub_string)
            .field_int("subVersion", self.sub_version)
            .key("tagsSet")
            .begin_array();
        for t in &self.tags_set {
            w.string(t);
        }
        w.end_array().field_str("topic", &self.topic).end_object();
    }
}

/// One consumer group in a heartbeat (`ConsumerData.java`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerData {
    /// Group.
    pub group_name: String,
    /// Push, pull or pop.
    pub consume_type: ConsumeType,
    /// Clustering or broadcasting.
    pub message_model: MessageModel,
    /// Start point for queues with no offset.
    pub consume_from_where: ConsumeFromWhere,
    /// Subscriptions.
    pub subscription_data_set: Vec<SubscriptionData>,
    /// Unit mode.
    pub unit_mode: bool,
}

/// One producer group in a heartbeat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerData {
    /// Group.
    pub group_name: String,
}

/// HEART_BEAT body (`HeartbeatData.java`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatData {
    /// Client id (key `clientID`, capital ID).
    pub client_id: String,
    /// Producer groups.
    pub producer_data_set: Vec<ProducerData>,
    /// Consumer groups.
    pub consumer_data_set: Vec<ConsumerData>,
    /// 5.x heartbeat v2 fingerprint; 0 keeps v1 behaviour.
    pub heartbeat_fingerprint: i32,
    /// 5.x: subscriptions omitted (v2 only).
    pub without_sub: bool,
}

impl JsonBody for HeartbeatData {
    const NAME: &'static str = "HeartbeatData";

    fn from_value(v: &Value) -> Result<Self, BodyError> {
        let o = Obj::new(v, Self::NAME)?;
        let mut consumer_data_set = Vec::new();
        for c in o.array("consumerDataSet")? {
            let c = Obj::new(c, "ConsumerData")?;
            consumer_data_set.push(ConsumerData {
                group_name: c.str("groupName")?,
                consume_type: c.enum_or(
                    "consumeType",
                    ConsumeType::from_java_name,
                    ConsumeType::ConsumePassively,
                )?,
                message_model: c.enum_or(
                    "messageModel",
                    MessageModel::from_java_name,
                    MessageModel::Clustering,
                )?,
                consume_from_where: c.enum_or(
                    "consumeFromWhere",
                    ConsumeFromWhere::from_java_name,
                    ConsumeFromWhere::ConsumeFromLastOffset,
                )?,
                subscription_data_set: c
                    .array("subscriptionDataSet")?
                    .iter()
                    .map(SubscriptionData::from_value)
                    .collect::<Result<_, _>>()?,
                unit_mode: c.bool_or("unitMode", false)?,
            });
        }
        let mut producer_data_set = Vec::new();
        for p in o.array("producerDataSet")? {
            producer_data_set
                .push(ProducerData { group_name: Obj::new(p, "ProducerData")?.str("groupName")? });
        }
        Ok(Self {
            client_id: o.str("clientID")?,
            producer_data_set,
            consumer_data_set,
            heartbeat_fingerprint: o.i32_or("heartbeatFingerprint", 0)?,
            without_sub: o.bool_or("withoutSub", false)?,
        })
    }

    fn write_json(&self, w: &mut JsonWriter) {
        w.begin_object().field_str("clientID", &self.client_id).key("consumerDataSet").begin_array();
        for c in &self.consumer_data_set {
            w.begin_object()
                .field_str("consumeFromWhere", c.consume_from_where.java_name())
                .field_str("consumeType", c.consume_type.java_name())
                .field_str("groupName", &c.group_name)
                .field_str("messageModel", c.message_model.java_name())
                .key("subscriptionDataSet")
                .begin_array();
            for s in &c.subscription_data_set {
                s.write_json(w);
            }
            w.end_array().field_bool("unitMode", c.unit_mode).end_object();
        }
        w.end_array().field_int("heartbeatFingerprint", self.heartbeat_fingerprint.into());
        w.key("producerDataSet").begin_array();
        for p in &self.producer_data_set {
            w.begin_object().field_str("groupName", &p.group_name).end_object();
        }
        w.end_array().field_bool("withoutSub", self.without_sub).end_object();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_api_rules() {
        let s = SubscriptionData::build("T", " tagA || tagB ||  || tagA", ExpressionType::Tag, 5);
        assert_eq!(s.tags_set, ["tagA", "tagB"]);
        assert_eq!(s.code_set, [3_552_231, 3_552_232]);
        assert!(s.matches_tag(Some("tagB")));
        assert!(!s.matches_tag(Some("tagB ")), "exact match, no trimming");
        assert!(!s.matches_tag(None), "tag-less messages are dropped with a tag set");
        let all = SubscriptionData::build("T", "", ExpressionType::Tag, 5);
        assert_eq!(all.sub_string, "*");
        assert!(all.matches_tag(None));
        let sql = SubscriptionData::build("T", "a > 1", ExpressionType::Sql92, 5);
        assert!(sql.tags_set.is_empty() && sql.matches_tag(None));
    }

    #[test]
    fn heartbeat_round_trip_and_java_sample() {
        let java = r#"{"clientID":"10.0.0.1@123#456","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"g1","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1700000000001,"tagsSet":[],"topic":"%RETRY%g1"},{"classFilterMode":false,"codeSet":[3552231,3552232],"expressionType":"TAG","subString":"tagA || tagB","subVersion":1700000000000,"tagsSet":["tagA","tagB"],"topic":"TopicA"}],"unitMode":false}],"heartbeatFingerprint":0,"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}],"withoutSub":false}"#;
        let h = HeartbeatData::decode(java.as_bytes()).unwrap();
        assert_eq!(h.consumer_data_set[0].subscription_data_set[1].code_set, [3_552_231, 3_552_232]);
        assert_eq!(h.encode(), java.as_bytes(), "byte-identical to Java's fastjson output");
    }
}
