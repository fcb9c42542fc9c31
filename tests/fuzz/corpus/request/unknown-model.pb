
fr-enBonjour