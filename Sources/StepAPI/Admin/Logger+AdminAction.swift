import Logging
import StepStore

extension Logger {
    /// The log line of an operator's action, beside its audit row: who, what, on which target, how it ended, and
    /// how long the note was. The note's text stays in the audit (an operator may quote a count in it), never in
    /// the log.
    func adminAction(
        _ actor: AdminActor, action: String, target: String, outcome: String, note: String?, walkerId: String? = nil
    ) {
        var metadata: Logger.Metadata = [
            "operator": .string(actor.name), "role": .string(actor.role.rawValue), "action": .string(action),
            "target": .string(target), "outcome": .string(outcome), "noteLength": .stringConvertible(note?.count ?? 0),
        ]
        if let walkerId { metadata["walker"] = .string(walkerId) }
        info("admin action", metadata: metadata)
    }
}
