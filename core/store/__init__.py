"""All SQL: the Store facade and one repository class per aggregate, plus the migrations runner."""
