/// An operator's decision on a review entry.
package enum ReviewDecision: String, Sendable, Hashable, CaseIterable {
    case accept
    case reject
}
