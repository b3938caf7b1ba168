import StepCore

/// The shapes the surfaces' bodies share, so each is written once: a body that is one object, a member (its key
/// and its value), and a member whose value is an array (every list body: `items`, `entries`, `events`, `days`,
/// `results`).
extension JSONTextWriter {
    /// A whole body: one object, its members written by `members` in sorted key order.
    static func object(capacity: Int, _ members: (inout JSONTextWriter) -> Void) -> String {
        var json = JSONTextWriter(capacity: capacity)
        json.beginObject()
        members(&json)
        json.endObject()
        return json.text
    }

    /// `"key":value`.
    mutating func member(_ key: StaticString, _ value: some JSONTextValue) {
        self.key(key)
        value.write(into: &self)
    }

    /// `"key":` and a number kept in whole thousandths, written as the decimal it stands for.
    mutating func member(_ key: StaticString, milli: Int) {
        self.key(key)
        value(milli: milli)
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

/// A value a member of a body can hold: a string, a whole number, a flag, or one of these or null.
protocol JSONTextValue {
    func write(into json: inout JSONTextWriter)
}

extension String: JSONTextValue {
    func write(into json: inout JSONTextWriter) { json.value(self) }
}

extension Int: JSONTextValue {
    func write(into json: inout JSONTextWriter) { json.value(self) }
}

extension Bool: JSONTextValue {
    func write(into json: inout JSONTextWriter) { json.value(self) }
}

extension Optional: JSONTextValue where Wrapped: JSONTextValue {
    func write(into json: inout JSONTextWriter) {
        if let self { self.write(into: &json) } else { json.null() }
    }
}
