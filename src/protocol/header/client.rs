//! Client registration headers: UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38).
//! HEART_BEAT (34) has no header fields; its content is the body.

use crate::protocol::ext::command_header;

command_header! {
    /// UNREGISTER_CLIENT request.
    pub struct UnregisterClientRequestHeader {
        /// Client id (capital ID).
        client_id: String = "clientID",
        /// Producer group to drop.
        producer_group: Option<String> = "producerGroup",
        /// Consumer group to drop.
        consumer_group: Option<String> = "consumerGroup",
    }
}

command_header! {
    /// GET_CONSUMER_LIST_BY_GROUP request.
    pub struct GetConsumerListByGroupRequestHeader {
        /// Group.
        consumer_group: String = "consumerGroup",
    }
}
