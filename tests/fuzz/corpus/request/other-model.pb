
es-enBuenos días