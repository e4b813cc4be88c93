//! `CheckClientRequestBody`: CHECK_CLIENT_CONFIG asks a broker whether it can run a
//! subscription's filter (PROTOCOL.md §4). Java's `start()` sends it for every SQL92
//! subscription and fails when the broker refuses, so a bad expression never reaches the pulls.

use super::{BodyError, JsonBody, Obj, SubscriptionData};
use crate::json::{JsonWriter, Value};

/// CHECK_CLIENT_CONFIG request body (`CheckClientRequestBody.java`). The broker only looks at
/// the subscription's expression type and text; client id and group are for its log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckClientRequestBody {
    /// The asking client's id.
    pub client_id: String,
    /// The consumer group.
    pub group: String,
    /// The subscription to check.
    pub subscription_data: SubscriptionData,
}

impl JsonBody for CheckClientRequestBody {
    const NAME: &'static str = "CheckClientRequestBody";

    fn from_value(v: &Value) -> Result<Self, BodyError> {
        let o = Obj::new(v, Self::NAME)?;
        let sub = o.get("subscriptionData").ok_or(BodyError::Field {
            body: Self::NAME,
            field: "subscriptionData",
            what: "is missing",
        })?;
        Ok(Self {
            client_id: o.opt_str("clientId")?.unwrap_or_default(),
            group: o.opt_str("group")?.unwrap_or_default(),
            subscription_data: SubscriptionData::from_value(sub)?,
        })
    }

    fn write_json(&self, w: &mut JsonWriter) {
        w.begin_object().field_str("clientId", &self.client_id).field_str("group", &self.group);
        w.key("subscriptionData");
        self.subscription_data.write_json(w);
        w.end_object();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ExpressionType;

    #[test]
    fn java_body_decodes_and_round_trips() {
        let java = br#"{"clientId":"127.0.0.1@1","group":"G","subscriptionData":{"classFilterMode":false,"codeSet":[],"expressionType":"SQL92","subString":"a > 5","subVersion":7,"tagsSet":[],"topic":"T"}}"#;
        let b = CheckClientRequestBody::decode(java).unwrap();
        assert_eq!((b.client_id.as_str(), b.group.as_str()), ("127.0.0.1@1", "G"));
        assert_eq!(b.subscription_data.expression_type, ExpressionType::Sql92);
        assert_eq!(b.subscription_data.sub_string, "a > 5");
        assert_eq!(CheckClientRequestBody::decode(&b.encode()).unwrap(), b);
        assert!(CheckClientRequestBody::decode(br#"{"clientId":"c","group":"G"}"#).is_err());
        assert!(CheckClientRequestBody::decode(br#"{"subscriptionData":[]}"#).is_err());
    }
}
