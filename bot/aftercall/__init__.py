"""After the call: Twilio's REST API, SMS notices and callbacks."""
