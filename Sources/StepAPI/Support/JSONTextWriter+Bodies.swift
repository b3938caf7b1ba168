import StepCore

/// The shapes the surfaces' bodies share, so each is written once: a body that is one object, and a member whose
/// value is an array (every list body: `items`, `entries`, `events`, `days`, `results`).
extension JSONTextWriter {
    /// A whole body: one object, its members written by `members` in sorted key order.
    static func object(capacity: Int, _ members: (inout JSONTextWriter) -> Void) -> String {
        var json = JSONTextWriter(capacity: capacity)
        json.beginObject()
        members(&json)
        json.endObject()
        return json.text
    }

    /// `"key":[…]`, each element written by `element`.
    mutating func array<Elements: Sequence>(
        _ key: StaticString, _ elements: Elements, element: (inout JSONTextWriter, Elements.Element) -> Void
    ) {
        self.key(key)
        beginArray()
        for item in elements { element(&self, item) }
        endArray()
    }
}
