"""People: subscribers' sign-up, newsletters, signed tokens, moving a subscription, masking their
addresses."""
