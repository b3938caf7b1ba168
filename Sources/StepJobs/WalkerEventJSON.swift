import StepCore
import StepStore

/// A stored walker event as the app and the webhook read it: `{"createdAt", "data", "id", "type"}`, and
/// `walkerId` last when the reader is not the walker (the webhook). The data is JSON text already and is
/// written as it is; the id is the event's sequence number as a string.
package enum WalkerEventJSON {
    package static func text(_ event: WalkerEvent, namingWalker: Bool) -> String {
        var text = #"{"createdAt":"#
        text += JobJSON.encode(InstantParser.format(event.createdAt, fractional: true))
        text += #","data":"#
        text += event.data
        text += #","id":"#
        text += JobJSON.encode(String(event.seq))
        text += #","type":"#
        text += JobJSON.encode(event.type)
        if namingWalker {
            text += #","walkerId":"#
            text += JobJSON.encode(event.walkerId)
        }
        text += "}"
        return text
    }
}
