"""Our API (DynamoPoolRelay), read-models of the APIs we consume, and naming rules."""
