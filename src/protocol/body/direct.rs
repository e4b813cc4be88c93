//! CONSUME_MESSAGE_DIRECTLY answer (`ConsumeMessageDirectlyResult`, `CMResult`).

use super::{BodyError, JsonBody, Obj};
use crate::json::{JsonWriter, Value};
use crate::protocol::ext::name_enum;

name_enum! {
    /// Outcome of a direct consume (`CMResult.java`).
    pub enum CMResult {
        /// Consumed.
        Success = "CR_SUCCESS",
        /// The listener asked for a later retry.
        Later = "CR_LATER",
        /// Orderly rollback.
        Rollback = "CR_ROLLBACK",
        /// Orderly commit.
        Commit = "CR_COMMIT",
        /// The listener failed.
        ThrowException = "CR_THROW_EXCEPTION",
        /// The listener returned nothing.
        ReturnNull = "CR_RETURN_NULL",
    }
}

/// The answer body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumeMessageDirectlyResult {
    /// Orderly consumer.
    pub order: bool,
    /// Auto commit (orderly).
    pub auto_commit: bool,
    /// Outcome.
    pub consume_result: CMResult,
    /// Free text.
    pub remark: Option<String>,
    /// Time spent, ms (key spelled `spentTimeMills` in Java).
    pub spent_time_mills: i64,
}

impl JsonBody for ConsumeMessageDirectlyResult {
    const NAME: &'static str = "ConsumeMessageDirectlyResult";

    fn from_value(v: &Value) -> Result<Self, BodyError> {
        let o = Obj::new(v, Self::NAME)?;
        Ok(Self {
            order: o.bool_or("order", false)?,
            auto_commit: o.bool_or("autoCommit", true)?,
            consume_result: o.enum_or("consumeResult", CMResult::from_java_name, CMResult::ReturnNull)?,
            remark: o.opt_str("remark")?,
            spent_time_mills: o.opt_i64("spentTimeMills")?.unwrap_or(0),
        })
    }

    fn write_json(&self, w: &mut JsonWriter) {
        w.begin_object()
            .field_bool("autoCommit", self.auto_commit)
            .field_str("consumeResult", self.consume_result.java_name())
            .field_bool("order", self.order)
            .field_opt_str("remark", self.remark.as_deref())
            .field_int("spentTimeMills", self.spent_time_mills)
            .end_object();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_shape() {
        let r = ConsumeMessageDirectlyResult {
            order: false,
            auto_commit: true,
            consume_result: CMResult::Success,
            remark: None,
            spent_time_mills: 3,
        };
        assert_eq!(
            &r.encode()[..],
            br#"{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"spentTimeMills":3}"#
        );
        assert_eq!(ConsumeMessageDirectlyResult::decode(&r.encode()).unwrap(), r);
    }
}
